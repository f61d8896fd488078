/* Derives the erf coefficients of shaders/prelude.glsl (vf_erf) and
 * measures the error of their f32 evaluation against C's double erf:
 *   cc -O2 scripts/erf_cheb.c -lm && ./a.out
 * prints the Chebyshev coefficients (40 of each: they show the decay), the
 * max absolute and relative error over [0, 4] in steps of 1e-6, and the
 * coefficients kept (8 for |x| < 1, 15 for 1 <= |x| < 4). */
#include <math.h>
#include <stdio.h>
/* Chebyshev interpolation coefficients of f on [lo, hi], N nodes */
static double g_small(double t) { double x = sqrt(t); return t == 0 ? 2 / sqrt(M_PI) : erf(x) / x; }
static double g_big(double x) { return erfc(x) * exp(x * x); }
static void cheb(double (*f)(double), double lo, double hi, int N, double *c)
{
    for (int k = 0; k < N; k++) {
        double s = 0;
        for (int j = 0; j < N; j++) {
            double th = M_PI * (j + 0.5) / N;
            s += f(0.5 * (hi + lo) + 0.5 * (hi - lo) * cos(th)) * cos(k * th);
        }
        c[k] = 2.0 * s / N;
    }
}
static float clen(const float *c, int n, float u)   /* f32 Clenshaw, u in [-1,1] */
{
    float b1 = 0, b2 = 0;
    for (int k = n - 1; k >= 1; k--) { float t = 2 * u * b1 - b2 + c[k]; b2 = b1; b1 = t; }
    return u * b1 - b2 + 0.5f * c[0];
}
int main(void)
{
    double a[40], b[40];
    cheb(g_small, 0, 1, 40, a);
    cheb(g_big, 1, 4, 40, b);
    for (int k = 0; k < 40; k++) printf("%2d %.3e %.3e\n", k, a[k], b[k]);
    int na = 8, nb = 15;
    float fa[40], fb[40];
    for (int k = 0; k < 40; k++) fa[k] = (float)a[k], fb[k] = (float)b[k];
    double maxe = 0, maxr = 0, at = 0;
    for (int i = 0; i <= 4000000; i++) {
        float x = (float)(i * 1e-6);
        float r;
        if (x < 1.0f) { float t = x * x; r = x * clen(fa, na, 2 * t - 1); }
        else if (x < 4.0f) { float u = (2 * x - 5) / 3; r = 1.0f - expf(-x * x) * clen(fb, nb, u); }
        else r = 1.0f;
        double e = fabs(r - erf((double)x));
        if (e > maxe) maxe = e, at = x;
        double rr = e / erf((double)x);
        if (x > 0 && rr > maxr) maxr = rr;
    }
    printf("max abs %.3e at %g, max rel %.3e\n", maxe, at, maxr);
    for (int k = 0; k < na; k++) printf("%.9e, ", a[k]);
    printf("\n");
    for (int k = 0; k < nb; k++) printf("%.9e, ", b[k]);
    printf("\n");
}

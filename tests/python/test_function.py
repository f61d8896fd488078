"""vkfuse.function over the library's vf_function: TF's tracing semantics
(cache keys, retracing and its log, side effects at trace time only,
vkfuse.print at every call, variables (captured by reference, arguments
by value), gradients, nesting, run_functions_eagerly, input_signature,
concrete functions) and AutoGraph's
control flow running in the graph. Runs on the default context's backend
(VKFUSE_BACKEND=cpu or vulkan)."""
import gc
import logging
import os
import sys
import traceback
import weakref

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import vkfuse as tf  # noqa: E402


@pytest.fixture(autouse=True)
def _graph_mode():
    tf.config.run_functions_eagerly(False)
    yield
    tf.config.run_functions_eagerly(False)


def line_of(f, text):
    import inspect
    src, first = inspect.getsourcelines(f)
    return first + next(i for i, l in enumerate(src) if text in l)


def test_traces_once_per_signature():
    traces = []

    @tf.function
    def add(a, b):
        traces.append(1)  # a Python side effect: at trace time only
        return a + b

    x = tf.constant([1.0, 2.0])
    for _ in range(3):
        np.testing.assert_array_equal(add(x, x).numpy(), [2.0, 4.0])
    assert len(traces) == 1 and add.experimental_get_tracing_count() == 1
    add(tf.constant([1.0, 2.0, 3.0]), tf.constant([1.0, 2.0, 3.0]))  # a new shape
    add(tf.constant([1, 2]), tf.constant([3, 4]))  # a new dtype
    assert add.experimental_get_tracing_count() == 3 and len(traces) == 3


def test_python_values_key_the_cache(caplog):
    @tf.function
    def scale(x, factor, training=False):
        return x * factor if training else x

    x = tf.constant([1.0, 2.0])
    with caplog.at_level(logging.INFO, logger="vkfuse"):
        assert scale(x, 2.0, training=True).numpy().tolist() == [2.0, 4.0]
        assert scale(x, 2.0, training=True).numpy().tolist() == [2.0, 4.0]
        assert scale(x, 3.0, training=True).numpy().tolist() == [3.0, 6.0]
        assert scale(x, 3.0).numpy().tolist() == [1.0, 2.0]
    assert scale.experimental_get_tracing_count() == 3
    msgs = [r.getMessage() for r in caplog.records]
    assert any("argument 'factor' changed: 3.0, traced with 2.0" in m for m in msgs), msgs
    assert any("argument 'training' changed: False, traced with True" in m for m in msgs), msgs


def test_retrace_log_names_the_tensor_argument(caplog):
    @tf.function
    def f(x, y):
        return x + tf.reduce_sum(y)

    with caplog.at_level(logging.INFO, logger="vkfuse"):
        f(tf.zeros([2]), tf.zeros([2]))
        f(tf.zeros([2]), tf.zeros([3]))
    assert any("argument 'y' dim 0: traced 2, got 3" in r.getMessage() for r in caplog.records), \
        [r.getMessage() for r in caplog.records]


def test_warning_after_repeated_retracing(caplog):
    @tf.function
    def f(x):
        return x + 1

    with caplog.at_level(logging.WARNING, logger="vkfuse"):
        for n in range(1, 7):
            f(tf.zeros([n]))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "5 out of the last 5 calls" in warnings[0] and "input_signature" in warnings[0]


def test_print_traces_once_vkfuse_print_every_call(capfd):
    @tf.function
    def noisy(x):
        print("Python print: tracing")
        tf.print("tf.print:", x)
        return x + 1

    x = tf.constant([1.0])
    for _ in range(3):
        x = noisy(x)
    out = capfd.readouterr()
    assert out.out.count("Python print: tracing") == 1
    assert out.err == "tf.print: [1]\ntf.print: [2]\ntf.print: [3]\n", out.err  # TF prints to stderr

    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32)])
    def shows(m):
        tf.print("m =", m, "rows:", tf.shape(m)[0] if False else m[0], output_stream=sys.stdout, summarize=1)
        tf.print("no tensor here", output_stream=sys.stdout)
        return m

    shows(tf.constant([[0.5, 1.0], [2.0, 3.0], [4.0, -1e-8]]))
    shows(tf.constant([[True * 1.0, 0.0]]))
    assert capfd.readouterr().out == ("m = [[0.5 1]\n ...\n [4 -1e-08]] rows: [0.5 1]\nno tensor here\n"
                                      "m = [[1 0]] rows: [1 0]\nno tensor here\n")
    tf.print("eager", tf.constant([True, False]), output_stream=sys.stdout)
    assert capfd.readouterr().out == "eager [1 0]\n"


def test_outside_list_appended_once():
    external = []

    @tf.function
    def side_effect(x):
        external.append(x)
        return x

    for _ in range(3):
        side_effect(1)
    assert external == [1]


def test_variables_captured_by_reference():
    w = tf.Variable([1.0, 2.0])

    @tf.function
    def step(dw, lr):
        w.assign_sub(lr * dw)
        return tf.reduce_sum(w)

    dw = tf.constant([1.0, 1.0])
    lr = tf.constant(0.5)
    assert float(step(dw, lr)) == 2.0
    assert float(step(dw, lr)) == 1.0
    np.testing.assert_array_equal(w.numpy(), [0.0, 1.0])
    w.assign([5.0, 5.0])  # an eager assign is seen by the next call
    assert float(step(dw, lr)) == 9.0 and step.experimental_get_tracing_count() == 1


def test_gradient_tape_inside_and_through_control_flow():
    w = tf.Variable([2.0, -3.0])

    @tf.function
    def grad(x):
        with tf.GradientTape() as tape:
            y = w * x
            if tf.reduce_sum(y) > 0:
                loss = tf.reduce_sum(y * y)
            else:
                loss = tf.reduce_sum(y) * 2.0
        return tape.gradient(loss, w)

    x = tf.constant([1.0, 1.0])
    np.testing.assert_allclose(grad(x).numpy(), [2.0, 2.0])         # sum(y) < 0: d(2*sum(w*x))/dw
    np.testing.assert_allclose(grad(tf.constant([3.0, -2.0])).numpy(), [2 * 6.0 * 3.0, 2 * 6.0 * -2.0])
    assert grad.experimental_get_tracing_count() == 1


def test_while_loop_runs_in_the_graph():
    @tf.function
    def collatz(n):
        steps = tf.constant(0)
        while n > 1:
            if n % 2 == 0:
                n = n // 2
            else:
                n = 3 * n + 1
            steps += 1
        return steps

    assert int(collatz(tf.constant(27))) == 111
    assert int(collatz(tf.constant(6))) == 8
    assert collatz.experimental_get_tracing_count() == 1
    assert "while" in collatz.graph_text()
    assert "ag__.while_stmt" in tf.autograph.to_code(collatz)  # a vkfuse.function: its Python function's code


def test_for_over_range_and_break():
    @tf.function
    def first_over(x, limit):
        found = tf.constant(-1)
        for i in tf.range(tf.shape(x)[0] if False else 6):
            if x[i] > limit:
                found = i
                break
        return found

    x = tf.constant([1.0, 2.0, 9.0, 3.0, 8.0, 0.0])
    assert int(first_over(x, tf.constant(5.0))) == 2
    assert int(first_over(x, tf.constant(8.5))) == 2
    assert int(first_over(x, tf.constant(10.0))) == -1
    assert first_over.experimental_get_tracing_count() == 1


def test_dynamic_predict_one_trace_both_ways():
    @tf.function
    def dynamic_predict(x):
        if tf.reduce_mean(x) > 0:
            return x * 2
        else:
            return x * 0.5

    np.testing.assert_allclose(dynamic_predict(tf.constant([1.0, 2.0])).numpy(), [2.0, 4.0])
    np.testing.assert_allclose(dynamic_predict(tf.constant([-1.0, -2.0])).numpy(), [-0.5, -1.0])
    assert dynamic_predict.experimental_get_tracing_count() == 1


def test_nested_functions():
    @tf.function
    def inner(x):
        return x * 3.0

    @tf.function
    def outer(x):
        return inner(x) + inner(x + 1.0)

    assert float(outer(tf.constant(1.0))) == 9.0
    assert float(outer(tf.constant(2.0))) == 15.0
    assert outer.experimental_get_tracing_count() == 1
    assert inner.experimental_get_tracing_count() == 0  # traced into outer's graph


def test_run_functions_eagerly():
    seen = []

    @tf.function
    def f(x):
        seen.append(float(x))  # reads a value: only possible eagerly
        return x + 1

    tf.config.run_functions_eagerly(True)
    assert tf.config.functions_run_eagerly()
    assert float(f(tf.constant(1.0))) == 2.0 and float(f(tf.constant(2.0))) == 3.0
    assert seen == [1.0, 2.0] and f.experimental_get_tracing_count() == 0


def test_input_signature_none_dims():
    @tf.function(input_signature=[tf.TensorSpec(shape=[None, 3], dtype=tf.float32)])
    def row_sums(x):
        return tf.reduce_sum(x, axis=1)

    for n in (1, 4, 7):
        got = row_sums(np.ones((n, 3), np.float32))
        assert got.shape == (n,) and float(got[0]) == 3.0
    assert row_sums.experimental_get_tracing_count() == 1
    with pytest.raises(Exception, match="signature"):
        row_sums(tf.ones([2, 4]))
    assert repr(tf.TensorSpec(shape=[None, 784], dtype=tf.float32)) == \
        "TensorSpec(shape=(None, 784), dtype=vkfuse.float32, name=None)"


def test_concrete_function_and_graph_text():
    @tf.function
    def f(x):
        return tf.nn.relu(x) * 2.0

    cf = f.get_concrete_function(tf.TensorSpec([3], tf.float32))
    assert f.experimental_get_tracing_count() == 1
    np.testing.assert_array_equal(cf(tf.constant([-1.0, 0.5, 2.0])).numpy(), [0.0, 1.0, 4.0])
    text = str(cf)
    assert text.startswith("graph f") and "relu" in text
    with pytest.raises(ValueError, match="expected TensorSpec"):
        cf(tf.constant([1.0, 2.0]))


def test_errors_point_at_the_users_line():
    @tf.function
    def bad(x):
        y = x + 1.0
        return tf.matmul(y, tf.ones([5, 5]))

    with pytest.raises(Exception) as e:
        bad(tf.ones([2, 3]))
    frames = [f for f in traceback.extract_tb(e.tb) if f.filename == __file__]
    assert frames[-1].lineno == line_of(bad, "return tf.matmul")


def test_conversion_error_names_the_line():
    @tf.function
    def one_branch(x):
        if x > 0:
            y = x
        return y

    with pytest.raises(tf.autograph.ConversionError, match="%s:%d" % (__file__, line_of(one_branch, "if x > 0"))):
        one_branch(tf.constant(1.0))
    # the failed trace left the context usable
    assert float(tf.constant(2.0) + 1.0) == 3.0


def test_methods():
    class Model:
        def __init__(self):
            self.w = tf.Variable(2.0)

        @tf.function
        def __call__(self, x):
            return x * self.w

    m = Model()
    assert float(m(tf.constant(3.0))) == 6.0
    assert float(m(tf.constant(4.0))) == 8.0


def test_variable_created_on_first_trace_only():
    class Counter:
        def __init__(self):
            self.v = None

        @tf.function
        def __call__(self, x):
            if self.v is None:
                self.v = tf.Variable(10.0)
            self.v.assign_add(x)
            return self.v.read_value()

    c = Counter()
    assert float(c(tf.constant(1.0))) == 11.0
    assert float(c(tf.constant(2.0))) == 13.0
    assert float(c.v.numpy()) == 13.0

    @tf.function
    def makes_one_each_trace(x):
        v = tf.Variable(1.0)
        return v + x

    assert float(makes_one_each_trace(tf.constant(1.0))) == 2.0
    assert makes_one_each_trace.experimental_get_tracing_count() == 1
    with pytest.raises(ValueError, match="%s:%d: .*on a trace after its first one"
                       % (__file__, line_of(makes_one_each_trace, "v = tf.Variable"))):
        makes_one_each_trace(tf.constant([1.0, 2.0]))  # a new shape traces again


def test_saved_model_runs_in_a_new_process_without_the_source(tmp_path):
    import subprocess
    w = tf.Variable([[1.0, -1.0], [2.0, 0.5]])

    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32)])
    def predict(x):
        y = tf.matmul(x, w)
        if tf.reduce_mean(y) > 0:
            return y * 2.0
        else:
            return y * 0.5

    path = tmp_path / "predict.vkf"
    tf.saved_model.save(predict, path)
    x = np.array([[1.0, 2.0], [3.0, -4.0], [0.5, 0.5]], np.float32)
    want = predict(x).numpy()
    loaded = tf.saved_model.load(path)
    np.testing.assert_allclose(loaded(x).numpy(), want)
    np.testing.assert_allclose(loaded.variables[0].numpy(), w.numpy())
    # a new process that has only the file (no Python source of predict)
    code = ("import sys, numpy as np; sys.path.insert(0, %r); import vkfuse as tf; "
            "f = tf.saved_model.load(sys.argv[1]); "
            "print(np.round(f(np.array([[-1.0, -1.0]], np.float32)).numpy(), 3).tolist())"
            % os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[[-1.5, 0.25]]"  # [-1, -1] @ w = [-3, 0.5]: mean < 0, so * 0.5

    @tf.function
    def untraced(x):
        return x

    with pytest.raises(ValueError, match="has not been traced yet"):
        tf.saved_model.save(untraced, tmp_path / "u.vkf")


def test_for_over_a_tensor_and_gradient_through_a_while_loop():
    @tf.function
    def row_total(m):
        acc = tf.zeros([2])
        for row in m:
            acc += row
        return acc

    m = tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    np.testing.assert_array_equal(row_total(m).numpy(), [9.0, 12.0])
    assert "while" in row_total.graph_text()

    @tf.function
    def grad_of_power(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = x
            i = tf.constant(0)
            while i < 3:
                y = y * x
                i += 1
        return tape.gradient(y, x)

    assert float(grad_of_power(tf.constant(2.0))) == 32.0  # d x^4 / dx = 4 x^3


def test_return_structures_and_keyword_arguments():
    w = tf.Variable([1.0, 2.0])

    @tf.function
    def nothing(x):
        w.assign_add(x)

    assert nothing(tf.constant([1.0, 1.0])) is None
    np.testing.assert_array_equal(w.numpy(), [2.0, 3.0])

    @tf.function
    def mixed(x):
        return x, 3, {"w": w}

    a = tf.constant([5.0])
    x, three, d = mixed(a)
    assert x.numpy().tolist() == [5.0] and three == 3 and d["w"].numpy().tolist() == [2.0, 3.0]
    w.assign([7.0, 7.0])
    assert mixed(a)[2]["w"].numpy().tolist() == [7.0, 7.0]  # a captured variable: its value at the call

    @tf.function
    def kw(x, scale=2.0, *, bias=None):
        return x * scale + (0.0 if bias is None else bias)

    assert kw(a).numpy().tolist() == [10.0]
    assert kw(a, scale=3.0).numpy().tolist() == [15.0]
    assert kw(x=a, bias=tf.constant(1.0)).numpy().tolist() == [11.0]
    assert kw(a, 2.0).numpy().tolist() == [10.0]  # the same values as the first call: no trace
    assert kw.experimental_get_tracing_count() == 3


def test_for_over_range_of_a_tensor_bound():
    @tf.function
    def triangle(n):
        total = tf.constant(0)
        for i in tf.range(n):
            total += i
        return total

    assert int(triangle(tf.constant(5))) == 10
    assert int(triangle(tf.constant(100))) == 4950
    assert triangle.experimental_get_tracing_count() == 1  # one graph loop for every n


C_SERVER = r"""
#include <vkfuse.h>
#include <stdio.h>
/* serves a function saved from Python: loads it and runs it on [6, 7] */
int main(int argc, char **argv)
{
    vf_context *ctx;
    vf_function *fn;
    if (argc < 2 || vf_context_create(NULL, &ctx) != VF_OK) return 1;
    if (vf_function_load(ctx, argv[1], &fn) != VF_OK) return fprintf(stderr, "%s\n", vf_error_message(ctx)), 1;
    vf_tensor *x = vf_tensor_from_host(ctx, VF_I32, 1, (int64_t[]){2}, (int32_t[]){6, 7}), *y = NULL;
    int32_t v[2];
    if (vf_function_call(fn, &x, &y) != VF_OK || vf_tensor_read(y, v, sizeof v) != VF_OK)
        return fprintf(stderr, "%s\n", vf_error_message(ctx)), 1;
    int n_in = -1, n_out = -1;
    vf_function_io_count(fn, &n_in, &n_out);
    printf("%d %d %d %d\n", n_in, n_out, v[0], v[1]);
    vf_function_destroy(fn);
    vf_context_destroy(ctx);
    return 0;
}
"""


def test_saved_function_served_from_c(tmp_path):
    import shutil
    import subprocess
    from vkfuse import _lib

    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32)])
    def next_collatz(x):
        return tf.where(x % 2 == 0, x // 2, 3 * x + 1)

    next_collatz(tf.constant([1]))
    tf.saved_model.save(next_collatz, tmp_path / "f.vkf")
    src = tmp_path / "serve.c"
    src.write_text(C_SERVER)
    lib = os.path.realpath(_lib.path)
    include = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include")
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "a C compiler is needed (the build needs one too)"
    subprocess.run([cc, "-std=c17", "-I", include, str(src), lib, "-o", str(tmp_path / "serve")], check=True)
    out = subprocess.run([str(tmp_path / "serve"), str(tmp_path / "f.vkf")], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, LD_LIBRARY_PATH=os.path.dirname(lib)))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "1", "3", "22"]


def test_a_function_that_prints_cannot_be_saved(tmp_path):
    @tf.function
    def f(x):
        tf.print(x, output_stream=sys.stdout)
        return x + 1

    f(tf.constant(1.0))
    with pytest.raises(tf.errors.UnimplementedError, match="host callback 'print'"):
        tf.saved_model.save(f, tmp_path / "f.vkf")


def test_input_signature_takes_python_values_as_tensors_and_keeps_no_argument():
    import weakref

    @tf.function(input_signature=[tf.TensorSpec([], tf.float32), tf.TensorSpec([2], tf.float32)])
    def scale(s, v):
        return s * v

    assert scale(2.0, [1.0, 2.0]).numpy().tolist() == [2.0, 4.0]
    assert scale(3.0, np.array([1.0, 2.0], np.float32)).numpy().tolist() == [3.0, 6.0]
    assert scale.experimental_get_tracing_count() == 1

    @tf.function
    def ident(x):
        return x + 0.0

    big = tf.ones([256, 256])
    ident(big)
    ref = weakref.ref(big)
    del big
    assert ref() is None  # the function keeps no reference to the arguments it was traced with


def test_variable_initial_values_inside_the_body():
    state = {}

    @tf.function
    def lazy(x):
        if "v" not in state:
            state["v"] = tf.Variable(lambda: tf.ones([2]) * 3.0)
        return state["v"] * x

    assert lazy(tf.constant(2.0)).numpy().tolist() == [6.0, 6.0]

    # an initial value computed by ops in the body, on the first trace only
    # (TF lifts the initializer): made once, then updated by every call
    made = []

    class Counter(tf.Module):
        def __init__(self):
            self.v = None

        @tf.function
        def __call__(self, x):
            if self.v is None:
                base = tf.ones([2]) * 2.0
                self.v = tf.Variable(tf.reduce_sum(base) + tf.zeros([2]))
                made.append(1)
            self.v.assign_add(x)
            return self.v * 1.0

    c = Counter()
    assert c(tf.constant([1.0, 2.0])).numpy().tolist() == [5.0, 6.0]
    assert c(tf.constant([1.0, 1.0])).numpy().tolist() == [6.0, 7.0]
    assert c.v.numpy().tolist() == [6.0, 7.0] and len(c.variables) == 1 and made == [1]
    assert c.__call__.experimental_get_tracing_count() == 1

    @tf.function
    def every_trace(x):
        v = tf.Variable(tf.zeros([2]))  # no `if`: a second trace would make another
        return v + x

    assert every_trace(tf.constant(1.0)).numpy().tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="%s:%d: .*on a trace after its first one"
                       % (__file__, line_of(every_trace, "v = tf.Variable"))):
        every_trace(tf.constant([1.0, 2.0, 3.0]))


def test_eager_tape_around_a_call():
    w = tf.Variable([1.0, 2.0])

    @tf.function
    def model(x):
        if tf.reduce_sum(x) > 0:
            y = x * w
        else:
            y = x - w
        return tf.reduce_sum(y * y)

    x = tf.constant([3.0, 4.0])
    for _ in range(3):  # the tape runs the body again for the gradient
        with tf.GradientTape() as tape:
            loss = model(x)
        np.testing.assert_allclose(tape.gradient(loss, w).numpy(), [2 * 3.0 * 3.0, 2 * 8.0 * 4.0])
    assert float(loss) == 9.0 + 64.0
    ctx = tf.context()
    from vkfuse._fn_lib import L
    assert L.vf_status_get(ctx.handle) == 0  # no error left behind


def test_gradient_through_a_call_with_a_variable_argument():
    @tf.function
    def add(a, b):
        return a + b

    v = tf.Variable(1.0)
    with tf.GradientTape() as tape:
        result = add(v, 1.0)
    assert float(tape.gradient(result, v)) == 1.0  # TF's example: the variable counted once


def test_reduce_retracing_generalises_shapes(capsys, caplog):
    @tf.function(reduce_retracing=True)
    def f(x, y):
        print("Tracing with", x, y)
        return tf.reduce_sum(x * 2.0, axis=0) + y

    with caplog.at_level(logging.INFO, logger="vkfuse"):
        for n in (2, 3, 4, 5, 2):
            np.testing.assert_array_equal(f(tf.ones([n, 3]), tf.ones([3])).numpy(), [2.0 * n + 1] * 3)
    assert f.experimental_get_tracing_count() == 2  # exact, then (None, 3): TF's count
    out = capsys.readouterr().out
    assert "shape=(2, 3)" in out and "shape=(None, 3)" in out and out.count("Tracing") == 2
    assert any("generalised" in r.getMessage() and "(None, 3)" in r.getMessage() for r in caplog.records)
    f(tf.ones([4]), tf.ones([3]))  # a new rank is a new exact trace, not an error
    assert f.experimental_get_tracing_count() == 3

    @tf.function
    def g(x):
        return x * 2.0
    for n in (2, 3, 4):
        g(tf.ones([n]))
    assert g.experimental_get_tracing_count() == 3  # without it: one trace per shape


def test_concrete_function_with_none_dims_traces_symbolically(capsys):
    @tf.function
    def g(x, k):
        print("Tracing with", x)
        return x * k

    cf = g.get_concrete_function(tf.TensorSpec([None, 2]), 3.0)
    assert "shape=(None, 2)" in capsys.readouterr().out
    assert cf.structured_input_signature[0].shape == (None, 2)
    np.testing.assert_array_equal(cf(tf.ones([3, 2])).numpy(), np.full((3, 2), 3.0))
    np.testing.assert_array_equal(g(tf.ones([5, 2]), 3.0).numpy(), np.full((5, 2), 3.0))  # reuses it
    assert g.experimental_get_tracing_count() == 1
    with pytest.raises(ValueError, match="expected TensorSpec"):
        cf(tf.ones([3]))
    g(tf.ones([4]), 3.0)  # does not fit: traced on its own
    assert g.experimental_get_tracing_count() == 2

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
    def h(x):
        return x + 1.0
    assert h.get_concrete_function().structured_input_signature[0].shape == (None,)


def test_a_variable_argument_can_be_assigned_in_the_body():
    @tf.function
    def bump(v, x):
        v.assign_add(x)
        doubled = v * 2.0  # reads after an assign see it
        v.assign_sub(0.5)
        return doubled

    a, b = tf.Variable([1.0, 2.0]), tf.Variable([10.0, 20.0])
    for _ in range(2):
        bump(a, tf.constant([1.0, 1.0]))
    assert a.numpy().tolist() == [2.0, 3.0]
    assert bump(b, tf.constant([1.0, 1.0])).numpy().tolist() == [22.0, 42.0]
    assert b.numpy().tolist() == [10.5, 20.5] and a.numpy().tolist() == [2.0, 3.0]
    # as TF: a variable argument is keyed by its dtype and shape, not by which variable it is
    assert bump.experimental_get_tracing_count() == 1
    c = tf.Variable([1.0, 2.0, 3.0])
    assert bump(c, tf.constant(1.0)).numpy().tolist() == [4.0, 6.0, 8.0]
    assert c.numpy().tolist() == [1.5, 2.5, 3.5] and bump.experimental_get_tracing_count() == 2

    @tf.function
    def reset(v, x):
        v.assign(x)
        return v  # the variable itself: its value after the assign
    assert reset(a, tf.constant([7.0, 8.0])).numpy().tolist() == [7.0, 8.0] and a.numpy().tolist() == [7.0, 8.0]
    assert reset(b, tf.constant([5.0, 6.0])).numpy().tolist() == [5.0, 6.0] and b.numpy().tolist() == [5.0, 6.0]
    assert a.numpy().tolist() == [7.0, 8.0] and reset.experimental_get_tracing_count() == 1


def test_variable_arguments_that_alias_stay_correct():
    @tf.function
    def two(v, w):
        v.assign_add(1.0)
        w.assign_add(10.0)
        return v + w

    a, b = tf.Variable([1.0]), tf.Variable([2.0])
    assert two(a, b).numpy().tolist() == [14.0] and (a.numpy()[0], b.numpy()[0]) == (2.0, 12.0)
    assert two(b, a).numpy().tolist() == [25.0] and (a.numpy()[0], b.numpy()[0]) == (12.0, 13.0)
    assert two.experimental_get_tracing_count() == 1
    # the same variable twice is one variable in the body (TF traces again for the aliasing)
    assert two(a, a).numpy().tolist() == [46.0] and a.numpy()[0] == 23.0
    assert two.experimental_get_tracing_count() == 2

    @tf.function
    def closure(v):
        a.assign_add(100.0)  # a by closure, and maybe passed too
        v.assign_add(1.0)
        return a + v

    assert closure(a).numpy().tolist() == [248.0] and a.numpy()[0] == 124.0
    assert closure(b).numpy().tolist() == [238.0] and (a.numpy()[0], b.numpy()[0]) == (224.0, 14.0)


def test_gradient_through_a_variable_argument_matches_finite_differences():
    @tf.function
    def loss(v, x):
        v.assign_add(x)  # the gradient is of the reads, as TF's
        return tf.reduce_sum(tf.tanh(v * x) * v)

    x = np.array([0.3, -0.7, 1.1], np.float32)
    w0 = np.array([0.5, 0.2, -0.4], np.float32)
    for _ in range(2):  # a second variable reuses the trace; its gradient too
        w = tf.Variable(w0)
        with tf.GradientTape() as tape:
            y = loss(w, tf.constant(x))
        g = tape.gradient(y, w).numpy()
        np.testing.assert_allclose(w.numpy(), w0 + x)
        ref = lambda u: np.sum(np.tanh((u + x) * x) * (u + x))  # noqa: E731
        eps = 1e-3
        fd = [(ref(w0 + eps * e) - ref(w0 - eps * e)) / (2 * eps) for e in np.eye(3, dtype=np.float64)]
        np.testing.assert_allclose(g, fd, rtol=1e-3, atol=1e-4)
    assert loss.experimental_get_tracing_count() == 1


def test_a_failed_call_keeps_no_variable_argument():
    @tf.function
    def bad(v):
        raise ValueError("a failing body")  # before any symbolic tensor, which the traceback would keep

    v = tf.Variable([1.0, 2.0])
    ref = weakref.ref(v)
    with pytest.raises(ValueError, match="a failing body"):
        bad(v)
    assert v.numpy().tolist() == [1.0, 2.0]
    del v
    gc.collect()
    assert ref() is None  # the function holds no variable of a call once it returned or failed


def test_saving_a_function_with_a_variable_argument(tmp_path):
    @tf.function
    def scaled(v, x):
        return v * x

    scaled(tf.Variable([2.0, 3.0]), tf.constant([1.0, 1.0]))
    tf.saved_model.save(scaled, tmp_path / "s.vkf")  # the variable is an input there: its value
    loaded = tf.saved_model.load(tmp_path / "s.vkf")
    assert loaded(tf.constant([4.0, 5.0]), tf.constant([2.0, 2.0])).numpy().tolist() == [8.0, 10.0]

    @tf.function
    def bump(v):
        v.assign_add(1.0)
        return v * 1.0
    bump(tf.Variable([1.0]))
    with pytest.raises(ValueError, match="assigns its variable argument 'v'.*by closure"):
        tf.saved_model.save(bump, tmp_path / "b.vkf")

"""AutoGraph's converter and operators on their own, over a NumPy fake of
graph-mode tensors (ag_fake.py): which statements become graph control
flow, the values they compute, and the errors for what cannot be converted."""

import traceback

import numpy as np
import pytest

import ag_fake as tf
from vkfuse import autograph
from vkfuse.autograph import ConversionError


@pytest.fixture
def backend():
    b = tf.FakeBackend()
    with autograph.use_backend(b):
        yield b


def run(f, *args):
    return autograph.convert(f)(*args)


def line_of(f, text):
    import inspect
    src, first = inspect.getsourcelines(f)
    return first + next(i for i, l in enumerate(src) if text in l)


def dynamic_predict(x):
    if tf.reduce_mean(x) > 0:
        return x * 2
    else:
        return x * 0.5


def test_dynamic_predict_is_one_graph_cond(backend):
    np.testing.assert_allclose(run(dynamic_predict, tf.constant([1.0, 2.0])).v, [2.0, 4.0])
    np.testing.assert_allclose(run(dynamic_predict, tf.constant([-1.0, -2.0])).v, [-0.5, -1.0])
    assert backend.conds == 2
    with pytest.raises(TypeError):  # unconverted, the tensor condition cannot be a Python bool
        dynamic_predict(tf.constant([1.0]))


def early_return(x):
    if tf.reduce_sum(x) > 10:
        return x - 10
    y = x + 1
    return y * 2


def test_early_return_in_one_branch(backend):
    np.testing.assert_allclose(run(early_return, tf.constant([20.0])).v, [10.0])
    np.testing.assert_allclose(run(early_return, tf.constant([1.0])).v, [4.0])
    assert backend.conds == 2


def python_condition(x, training, seen):
    if training:
        seen.append("train")
        x = x * 0.5
    else:
        seen.append("eval")
    return x


def test_python_bool_condition_stays_python(backend):
    seen = []
    assert run(python_condition, tf.constant(4.0), True, seen).v == 2.0
    assert run(python_condition, tf.constant(4.0), False, seen).v == 4.0
    assert seen == ["train", "eval"] and backend.conds == 0


def sign(x):
    if x > 0:
        s = 1.0
    elif x < 0:
        s = -1.0
    else:
        s = 0.0
    return s * x


def test_elif_chain_on_tensors(backend):
    for v, want in ((3.0, 3.0), (-2.0, 2.0), (0.0, 0.0)):
        assert run(sign, tf.constant(v)).v == want
    assert backend.conds == 6  # two nested conds per call, Python numbers made tensors


def collatz(n):
    steps = 0
    while n > 1:
        if n % 2 == 0:
            n = n // 2
        else:
            n = 3 * n + 1
        steps += 1
    return steps


def test_while_on_tensor_carries_variables(backend):
    assert int(run(collatz, tf.constant(27, np.int32)).v) == 111
    assert backend.loops == 1
    assert run(collatz, 27) == 111 and backend.loops == 1  # a Python int loops in Python


def sum_range(n):
    total = 0
    for i in tf.range_(n):
        total = total + i * 2
    return total


def sum_rows(m):
    acc = tf.constant([0.0, 0.0])
    for row in m:
        acc += row
    return acc


def test_for_over_tensors(backend):
    assert int(run(sum_range, 5).v) == 20
    m = tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    np.testing.assert_allclose(run(sum_rows, m).v, [9.0, 12.0])
    assert backend.loops == 2
    assert int(run(sum_range, 0).v) == 0


def first_big(x, limit):
    i = 0
    found = -1
    while i < 10:
        i += 1
        if i % 2 == 0:
            continue
        if x * i > limit:
            found = i
            break
    return found


def test_break_and_continue_in_tensor_loop(backend):
    assert int(run(first_big, tf.constant(2.0), 9.0).v) == 5   # odd i with 2*i > 9
    assert int(run(first_big, tf.constant(0.0), 9.0).v) == -1
    assert backend.loops == 2


def search(x):
    found = -1
    for i in tf.range_(8):
        if x[i] > 5.0:
            found = i
            break
    return found


def search_return(x):
    for i in tf.range_(8):
        if x[i] > 5.0:
            return i
    return -1


def test_break_in_tensor_for_loop(backend):
    assert int(run(search, tf.constant([1, 2, 9, 3, 7, 0, 0, 0], np.float32)).v) == 2
    assert int(run(search, tf.constant(np.zeros(8), np.float32)).v) == -1
    assert backend.loops == 2
    with pytest.raises(ConversionError, match="return inside the for loop, whose condition is a tensor"):
        run(search_return, tf.constant(np.zeros(8), np.float32))


def python_loop_break(x):
    out = 0
    for i in range(100):
        if i == 3:
            break
        out += i
    return out + x


def test_python_loop_with_python_break(backend):
    assert run(python_loop_break, 1) == 4 and backend.loops == 0


def logic(x, y):
    a = x > 0 and y > 0
    b = not (x > 0) or y > 0
    c = 1.0 if x > y else 2.0
    return a, b, c


def test_logical_operators_and_if_expression(backend):
    a, b, c = run(logic, tf.constant(1.0), tf.constant(-1.0))
    assert (bool(a.v), bool(b.v), float(c.v)) == (False, False, 1.0)
    assert run(logic, 1, 2) == (True, True, 2.0)


def one_branch_only(x):
    if x > 0:
        y = x + 1
    return y


def one_branch_temporary(x):
    if x > 0:
        t = x + 1
        x = t * 2
    return x


def test_variable_in_one_branch_only(backend):
    with pytest.raises(ConversionError) as e:
        run(one_branch_only, tf.constant(1.0))
    msg = str(e.value)
    assert "%s:%d" % (__file__, line_of(one_branch_only, "if x > 0")) in msg
    assert "'y'" in msg and "else branch" in msg
    assert float(run(one_branch_temporary, tf.constant(1.0)).v) == 4.0  # not used after: fine
    assert run(one_branch_only, 1) == 2  # a Python condition is plain Python


def changes_list(x, log):
    if x > 0:
        log.append(x)
    return x


def test_tensor_if_changing_python_list(backend):
    with pytest.raises(ConversionError) as e:
        run(changes_list, tf.constant(1.0), [])
    assert "%s:%d" % (__file__, line_of(changes_list, "if x > 0")) in str(e.value)
    assert "list 'log'" in str(e.value)
    log = []
    run(changes_list, 1.0, log)
    assert log == [1.0]


def returns_in_one_branch(x):
    if x > 0:
        return x


def test_return_in_one_branch_only(backend):
    with pytest.raises(ConversionError, match="returns a value in its if branch only"):
        run(returns_in_one_branch, tf.constant(1.0))


def defined_in_loop(x):
    while x < 10:
        last = x
        x = x + 1
    return last


def test_variable_first_assigned_in_tensor_loop(backend):
    with pytest.raises(ConversionError, match="'last' is first assigned inside the while loop"):
        run(defined_in_loop, tf.constant(1.0))
    assert run(defined_in_loop, 1.0) == 9.0


def breaks_python_loop_on_tensor(x):
    for i in [1, 2, 3]:
        if x > i:
            break
    return x


def test_python_loop_cannot_stop_on_tensor(backend):
    with pytest.raises(ConversionError, match="iterates over a Python list"):
        run(breaks_python_loop_on_tensor, tf.constant(5.0))


def differing_python_values(x):
    if x > 0:
        mode = "up"
    else:
        mode = "down"
    return mode


def test_python_values_must_agree(backend):
    with pytest.raises(ConversionError, match="'mode' holds a Python str"):
        run(differing_python_values, tf.constant(1.0))


def fails_inside(x):
    if x > 0:
        raise ZeroDivisionError("in branch")
    return x


def test_errors_point_at_user_line(backend):
    with pytest.raises(ZeroDivisionError) as e:
        run(fails_inside, tf.constant(1.0))
    frames = traceback.extract_tb(e.tb)
    assert frames[-1].filename == __file__
    assert frames[-1].lineno == line_of(fails_inside, "raise ZeroDivisionError")


def test_closure_cells_are_shared(backend):
    scale = 2.0

    def f(x):
        if x > 0:
            x = x * scale
        return x

    g = autograph.convert(f)
    assert float(g(tf.constant(1.0)).v) == 2.0
    scale = 5.0
    assert float(g(tf.constant(1.0)).v) == 5.0
    assert autograph.convert(f) is g  # converted once


class Model:
    def __init__(self):
        self.k = 3.0

    def apply(self, x):
        if x > 0:
            x = x * self.k
        return x


def test_methods_stay_bound(backend):
    m = Model()
    assert float(autograph.convert(m.apply)(tf.constant(2.0)).v) == 6.0


def test_to_code_shows_converted_source():
    code = autograph.to_code(collatz)
    assert "ag__.while_stmt" in code and "ag__.if_stmt" in code
    assert code.startswith("def collatz(n):")
    assert "ag__.if_stmt" in autograph.to_code(dynamic_predict)


def test_do_not_convert_and_lambdas():
    @autograph.do_not_convert
    def f(x):
        if x:
            return 1
        return 2

    assert autograph.convert(f) is f
    g = lambda x: x  # noqa: E731
    assert autograph.convert(g) is g


def test_function_without_source_runs_as_written(caplog):
    ns = {}
    exec("def f(x):\n    if x > 0:\n        return 1\n    return 2\n", ns)
    with caplog.at_level("WARNING", logger="vkfuse"):
        g = autograph.convert(ns["f"])
    assert g is ns["f"] and g(1) == 1
    assert "could not convert f" in caplog.text


def count_to(n):
    total = 0
    for i in tf.range_module.range(1, n, 2):
        total = total + i
    return total


def test_range_with_a_tensor_bound(backend):
    tf.range_module = type("m", (), {"range": staticmethod(lambda *a: list(range(*a)))})
    assert run(count_to, 6) == 9 and backend.loops == 0  # Python bounds: the module's own range
    assert int(run(count_to, tf.constant(6, np.int32)).v) == 9 and backend.loops == 1


def clipped(x):
    if x > 1.0:
        x = x * 0.0 + 1.0
    return x


def uses_helper(x):
    return clipped(x) * 2.0


def test_functions_called_are_converted_too(backend):
    assert float(run(uses_helper, tf.constant(5.0)).v) == 2.0
    assert float(run(uses_helper, tf.constant(0.5)).v) == 1.0
    assert backend.conds == 2
    assert "ag__.converted(clipped)" in autograph.to_code(uses_helper)
    assert run(lambda: len([1, 2])) == 2  # builtins are called as they are

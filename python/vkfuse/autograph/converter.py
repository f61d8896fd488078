"""AutoGraph's source converter: a Python function's `if`, `while`, `for`,
`and`/`or`/`not` and `x if c else y` become calls of the run-time operators
(operators.py), which choose graph control flow when the condition is a
tensor, as TensorFlow's AutoGraph does.

The passes, on the function's AST (standard `ast` module):
  1. normalize: an `if` branch that always returns takes the statements
     after the `if` into its other branch, so that `if c: return a` followed
     by `return b` is one if/else with a return in each branch.
  2. lower: `return`, `break` and `continue` inside control flow become
     assignments to flag variables (do_return, retval_, break_N,
     continue_N); the statements after one are guarded by `if not flag:`,
     and loop conditions test the break flags.
  3. annotate: for every if and loop, the variables read after it (live)
     and those certainly assigned before it (defined).
  4. convert: each if / while / for (innermost first) becomes nested
     functions over the variables it assigns and one operator call.

The converted code is compiled with the user's file name and line numbers,
so tracebacks and the operators' messages point at the user's source.
"""

import ast
import inspect
import textwrap
import types

from .operators import ConversionError

_MUTATORS = {"append", "extend", "insert", "pop", "remove", "clear", "update", "add", "discard",
             "setdefault", "popitem", "sort", "reverse"}

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef,
           ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


# ---- name analysis ------------------------------------------------------------

def _walk_scope(node):
    """Nodes of node's own scope: nested functions, classes and
    comprehensions are not entered (their names are their own), but a
    nested def's name is an assignment here."""
    todo = [node] if not isinstance(node, list) else list(node)
    while todo:
        n = todo.pop()
        yield n
        for c in ast.iter_child_nodes(n):
            if isinstance(c, _SCOPES):
                yield c
                if isinstance(c, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
                    # the first iterable is evaluated in this scope
                    todo.append(c.generators[0].iter)
                elif isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                    todo.extend(c.args.defaults + [d for d in c.args.kw_defaults if d])
                    if not isinstance(c, ast.Lambda):
                        todo.extend(c.decorator_list)
            else:
                todo.append(c)


def assigned(nodes):
    """Names bound in nodes' scope, in first-seen order."""
    out = {}
    for n in _walk_scope(nodes):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out[n.id] = n
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out[n.name] = n
    return [k for k in out if not k.startswith("ag__")]


def read(nodes):
    """Names read anywhere under nodes, nested scopes included (a closure
    reads the variable when it runs: conservatively, live)."""
    out = set()
    for n in ast.walk(nodes) if not isinstance(nodes, list) else (m for x in nodes for m in ast.walk(x)):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            out.add(n.id)
        elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
            out.add(n.target.id)
    return out


def mutated_containers(nodes, local):
    """Names whose objects the code changes in place (x.append(...),
    x[i] = ..., del x[i]) that are not bound in it: candidates for the
    'changes a Python list' error under a tensor condition."""
    out = []
    for n in _walk_scope(nodes):
        name = None
        func = n.func if isinstance(n, ast.Call) else None
        if (isinstance(func, ast.Call) and isinstance(func.func, ast.Attribute) and func.func.attr == "converted"
                and func.args):
            func = func.args[0]  # ag__.converted(x.append)(...)
        if (isinstance(func, ast.Attribute) and func.attr in _MUTATORS and isinstance(func.value, ast.Name)):
            name = func.value.id
        elif (isinstance(n, ast.Subscript) and isinstance(n.ctx, (ast.Store, ast.Del))
              and isinstance(n.value, ast.Name)):
            name = n.value.id
        if name and name not in local and name not in out and not name.startswith("ag__"):
            out.append(name)
    return out


def _name(id_, ctx=None):
    return ast.Name(id=id_, ctx=ctx or ast.Load())


def _ag(attr):
    return ast.Attribute(value=_name("ag__"), attr=attr, ctx=ast.Load())


def _call(func, args, keywords=()):
    return ast.Call(func=func, args=list(args), keywords=list(keywords))


def _tuple(names, ctx=None):
    return ast.Tuple(elts=[_name(n, ctx) for n in names], ctx=ctx or ast.Load())


def _strs(names):
    return ast.Tuple(elts=[ast.Constant(n) for n in names], ctx=ast.Load())


def _assign(name, value):
    return ast.Assign(targets=[_name(name, ast.Store())], value=value)


def _thunk(expr):
    return ast.Lambda(args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[],
                                         kwarg=None, defaults=[]), body=expr)


def _def(name, params, body):
    return ast.FunctionDef(name=name, args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=p) for p in params],
                                                         vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None,
                                                         defaults=[]),
                           body=body or [ast.Pass()], decorator_list=[], returns=None, type_comment=None)


def _located(nodes, where):
    for n in nodes:
        ast.copy_location(n, where)
        for c in ast.walk(n):
            if not hasattr(c, "lineno") and "lineno" in c._attributes:
                ast.copy_location(c, where)
    return nodes


# ---- pass 1: normalize returns ---------------------------------------------------

def _always_returns(block):
    if not block:
        return False
    last = block[-1]
    if isinstance(last, (ast.Return, ast.Raise)):
        return True
    return isinstance(last, ast.If) and _always_returns(last.body) and _always_returns(last.orelse)


def normalize(block):
    out = []
    for i, s in enumerate(block):
        for field in ("body", "orelse", "finalbody"):
            if isinstance(s, (ast.If, ast.While, ast.For, ast.With, ast.Try)) and hasattr(s, field):
                setattr(s, field, normalize(getattr(s, field)))
        out.append(s)
        rest = block[i + 1:]
        if isinstance(s, ast.If) and rest:
            if _always_returns(s.body) and not _always_returns(s.orelse):
                s.orelse = normalize(s.orelse + rest)
                return out
            if _always_returns(s.orelse) and s.orelse and not _always_returns(s.body):
                s.body = normalize(s.body + rest)
                return out
    return out


# ---- pass 2: lower return / break / continue ------------------------------------

class _Lowering:
    def __init__(self, taken, returns):
        self.lower_returns = returns
        self.taken = set(taken)
        self.count = 0
        self.do_return = self.fresh("do_return")
        self.retval = self.fresh("retval_")

    def fresh(self, base):
        name = base
        while name in self.taken:
            self.count += 1
            name = "%s%d" % (base, self.count)
        self.taken.add(name)
        return name

    def block(self, stmts, loop):
        """loop: (break flag, continue flag, flags used) of the innermost
        loop, or None. Returns the new statements and the flags they may set."""
        out, flags = [], []
        for i, s in enumerate(stmts):
            new, set_ = self.stmt(s, loop)
            out.extend(new)
            for f in set_:
                if f not in flags:
                    flags.append(f)
            if set_ and i + 1 < len(stmts):
                rest, rest_flags = self.block(stmts[i + 1:], loop)
                test = ast.UnaryOp(op=ast.Not(), operand=_name(set_[0]))
                for f in set_[1:]:
                    test = ast.BoolOp(op=ast.And(), values=[test, ast.UnaryOp(op=ast.Not(), operand=_name(f))])
                out.extend(_located([ast.If(test=test, body=rest, orelse=[])], stmts[i + 1]))
                for f in rest_flags:
                    if f not in flags:
                        flags.append(f)
                break
        return out, flags

    def stmt(self, s, loop):
        if isinstance(s, ast.Return) and self.lower_returns:
            value = s.value if s.value is not None else ast.Constant(None)
            return _located([_assign(self.retval, value), _assign(self.do_return, ast.Constant(True))], s), \
                [self.do_return]
        if isinstance(s, (ast.Break, ast.Continue)):
            if loop is None:
                raise ConversionError("line %d: '%s' outside a loop" % (s.lineno, type(s).__name__.lower()))
            flag = loop[0] if isinstance(s, ast.Break) else loop[1]
            loop[2].add(flag)
            return _located([_assign(flag, ast.Constant(True))], s), [flag]
        if isinstance(s, ast.If):
            s.body, f1 = self.block(s.body, loop)
            s.orelse, f2 = self.block(s.orelse, loop)
            return [s], f1 + [f for f in f2 if f not in f1]
        if isinstance(s, (ast.While, ast.For)):
            return self.loop(s)
        if isinstance(s, (ast.With, ast.Try)):
            flags = []
            for field in ("body", "orelse", "finalbody"):
                if hasattr(s, field):
                    new, f = self.block(getattr(s, field), loop)
                    setattr(s, field, new)
                    flags += [x for x in f if x not in flags]
            for h in getattr(s, "handlers", []):
                h.body, f = self.block(h.body, loop)
                flags += [x for x in f if x not in flags]
            return [s], flags
        return [s], []

    def loop(self, s):
        brk, cont = self.fresh("break_"), self.fresh("continue_")
        used = set()
        body, flags = self.block(s.body, (brk, cont, used))
        before = []
        if cont in used:
            body = _located([_assign(cont, ast.Constant(False))], s.body[0]) + body
        stops = [f for f in (brk, self.do_return) if f in flags]
        if brk in used:
            before = _located([_assign(brk, ast.Constant(False))], s)
        s.body = body
        after, set_ = [], [self.do_return] if self.do_return in flags else []
        if s.orelse:
            orelse, of = self.block(s.orelse, None)
            set_ += [f for f in of if f not in set_]
            if stops:
                after = _located([ast.If(test=self._none_set(stops), body=orelse, orelse=[])], s.orelse[0])
            else:
                after = orelse
            s.orelse = []
        if stops:
            if isinstance(s, ast.While):
                s.test = ast.BoolOp(op=ast.And(), values=[self._none_set(stops), s.test])
            else:
                s.ag_extra_test = self._none_set(stops)
        return before + [s] + after, set_

    @staticmethod
    def _none_set(flags):
        tests = [ast.UnaryOp(op=ast.Not(), operand=_name(f)) for f in flags]
        return tests[0] if len(tests) == 1 else ast.BoolOp(op=ast.And(), values=tests)


def _has_nested_return(body):
    """Whether a return sits inside a compound statement (not only at the
    function's top level), so that it needs the do_return flag."""
    top = {id(s) for s in body}
    return any(isinstance(n, ast.Return) and id(n) not in top for n in _walk_scope(body))


def _loop_reads(node):
    extra = getattr(node, "ag_extra_test", None)
    return read(node) | (read(extra) if extra is not None else set())


# ---- pass 3: liveness and definite assignment -------------------------------------

def annotate(block, live_after, defined):
    """Sets ag_live (names read after the node) and ag_defined (names
    certainly bound before it) on every if and loop; returns the names
    certainly bound after the block."""
    defined = set(defined)
    for i, s in enumerate(block):
        live = read(block[i + 1:]) | live_after
        if isinstance(s, ast.If):
            s.ag_live, s.ag_defined = live, set(defined)
            d1 = annotate(s.body, live, defined)
            d2 = annotate(s.orelse, live, defined)
            defined |= d1 & d2
        elif isinstance(s, (ast.While, ast.For)):
            s.ag_live, s.ag_defined = live, set(defined)
            annotate(s.body, live | _loop_reads(s), defined)
            annotate(s.orelse, live, defined)
        elif isinstance(s, (ast.With, ast.Try)):
            defined |= annotate(s.body, live, defined)
            for field in ("orelse", "finalbody"):
                annotate(getattr(s, field, []), live, defined)
            for h in getattr(s, "handlers", []):
                annotate(h.body, live, defined)
        else:
            defined |= set(assigned([s]))
    return defined


# ---- pass 4: control flow to operator calls ------------------------------------------

class _Converter(ast.NodeTransformer):
    def __init__(self, filename, taken):
        self.filename = filename
        self.taken = set(taken)
        self.count = 0
        self.made = set()

    def fresh(self, base):
        self.count += 1
        name = "%s_%d" % (base, self.count)
        while name in self.taken:
            self.count += 1
            name = "%s_%d" % (base, self.count)
        self.taken.add(name)
        self.made.add(name)
        return name

    def _assigned(self, nodes):
        return [n for n in assigned(nodes) if n not in self.made]

    # Nested functions and classes keep their own control flow.
    def visit_FunctionDef(self, node):
        return node

    visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = visit_FunctionDef

    def _tail(self, line):
        return [ast.Constant(line), ast.Constant(self.filename)]

    def _init(self, names, defined):
        """The variables' values before the statement; ag__.ld for those
        that may be unassigned there."""
        elts = []
        for n in names:
            if n in defined:
                elts.append(_name(n))
            else:
                elts.append(_call(_ag("ld"), [_thunk(_name(n)), ast.Constant(n)]))
        return ast.Tuple(elts=elts, ctx=ast.Load())

    def _mutated(self, nodes, local):
        names = mutated_containers(nodes, local)
        if not names:
            return []
        pairs = ast.Tuple(elts=[ast.Tuple(elts=[ast.Constant(n), _thunk(_name(n))], ctx=ast.Load())
                                for n in names], ctx=ast.Load())
        return [ast.keyword(arg="mutated", value=pairs)]

    def visit_Call(self, node):
        """f(...) -> ag__.converted(f)(...): the user's own functions that the
        converted one calls are converted too (when they run), as TF's
        AutoGraph does; library and builtin functions are called as they are."""
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in ("super", "locals", "globals", "vars", "eval",
                                                                "exec"):
            return node  # they read the caller's frame
        if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
                and node.func.value.id == "ag__":
            return node
        node.func = ast.copy_location(_call(_ag("converted"), [node.func]), node.func)
        return node

    def visit_BoolOp(self, node):
        self.generic_visit(node)
        fn = _ag("and_" if isinstance(node.op, ast.And) else "or_")
        expr = node.values[-1]
        for v in reversed(node.values[:-1]):
            expr = _call(fn, [_thunk(v), _thunk(expr)])
        return ast.copy_location(expr, node)

    def visit_UnaryOp(self, node):
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.copy_location(_call(_ag("not_"), [node.operand]), node)
        return node

    def visit_IfExp(self, node):
        self.generic_visit(node)
        return ast.copy_location(_call(_ag("if_exp"), [node.test, _thunk(node.body), _thunk(node.orelse)]
                                       + self._tail(node.lineno)), node)

    def visit_If(self, node):
        live, defined = node.ag_live, node.ag_defined
        self.generic_visit(node)
        names = self._assigned(node.body + node.orelse)
        t, f = self.fresh("if_true"), self.fresh("if_false")
        ret = [ast.Return(value=_tuple(names))]
        call = _call(_ag("if_stmt"), [node.test, _name(t), _name(f), self._init(names, defined), _strs(names),
                                      _strs([n for n in names if n in live])] + self._tail(node.lineno),
                     self._mutated(node.body + node.orelse, set(names)))
        out = [_def(t, names, node.body + ret), _def(f, names, node.orelse + ret)]
        out.append(ast.Assign(targets=[_tuple(names, ast.Store())], value=call) if names else ast.Expr(call))
        return _located(out, node)

    def _loop_vars(self, node, body):
        """The variables a loop carries: those its body assigns that the loop
        reads (on the next iteration) or that are read after it."""
        inside = _loop_reads(node) | node.ag_live
        return [n for n in self._assigned(body) if n in inside]

    def visit_While(self, node):
        live, defined = node.ag_live, node.ag_defined
        self.generic_visit(node)
        names = self._loop_vars(node, node.body)
        t, b = self.fresh("loop_test"), self.fresh("loop_body")
        call = _call(_ag("while_stmt"), [_name(t), _name(b), self._init(names, defined), _strs(names),
                                         _strs([n for n in names if n in live])] + self._tail(node.lineno),
                     self._mutated(node.body, set(self._assigned(node.body))))
        out = [_def(t, names, [ast.Return(value=node.test)]),
               _def(b, names, node.body + [ast.Return(value=_tuple(names))])]
        out.append(ast.Assign(targets=[_tuple(names, ast.Store())], value=call) if names else ast.Expr(call))
        return _located(out, node)

    def visit_For(self, node):
        live, defined = node.ag_live, node.ag_defined
        extra = getattr(node, "ag_extra_test", None)
        it = node.iter
        rng = it.func if (isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute)
                          and it.func.attr == "range" and not it.keywords) else None
        self.generic_visit(node)
        if extra is not None:
            node.ag_extra_test = extra = self.visit(extra)
        target_assign = ast.Assign(targets=[node.target], value=_name("ag__elem"))
        body = [target_assign] + node.body
        names = self._loop_vars(node, body)
        b = self.fresh("loop_body")
        out = [_def(b, ["ag__elem"] + names, body + [ast.Return(value=_tuple(names))])]
        test = ast.Constant(None)
        if extra is not None:
            e = self.fresh("extra_test")
            out.append(_def(e, names, [ast.Return(value=extra)]))
            test = _name(e)
        it = node.iter
        if rng is not None:
            # vkfuse.range(n): a graph loop over a counter when n is a tensor
            it = ast.copy_location(_call(_ag("range_"), [rng] + it.args), it)
        call = _call(_ag("for_stmt"), [it, test, _name(b), self._init(names, defined), _strs(names),
                                       _strs([n for n in names if n in live])] + self._tail(node.lineno),
                     self._mutated(body, set(self._assigned(body))))
        out.append(ast.Assign(targets=[_tuple(names, ast.Store())], value=call) if names else ast.Expr(call))
        return _located(out, node)

    def visit_AsyncFor(self, node):
        raise ConversionError("%s:%d: 'async for' cannot be converted" % (self.filename, node.lineno))

    visit_AsyncWith = visit_AsyncFor


# ---- entry points -------------------------------------------------------------------

class NoSource(ConversionError):
    """The function's source cannot be read (made by exec, in a REPL)."""


def _function_ast(f):
    try:
        src = inspect.getsource(f)
        filename = inspect.getsourcefile(f) or "<unknown>"
        first = f.__code__.co_firstlineno
    except (OSError, TypeError) as e:
        raise NoSource("cannot read the source of %r (%s): AutoGraph needs the function's source"
                       % (f, e)) from None
    tree = ast.parse(textwrap.dedent(src))
    fn = tree.body[0]
    if not isinstance(fn, ast.FunctionDef):
        raise ConversionError("%s:%d: AutoGraph converts functions written with 'def' (not %s)"
                              % (filename, first, type(fn).__name__))
    ast.increment_lineno(tree, first - 1)
    fn.decorator_list = []
    return fn, filename


def convert_ast(fn, filename):
    """The converted FunctionDef of fn (its body rewritten in place)."""
    for n in _walk_scope(fn.body):
        if isinstance(n, (ast.Yield, ast.YieldFrom)):
            raise ConversionError("%s:%d: generators cannot be converted" % (filename, n.lineno))
    taken = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)} | {a.arg for a in ast.walk(fn)
                                                                       if isinstance(a, ast.arg)}
    body = normalize(fn.body)
    low = _Lowering(taken, _has_nested_return(body))
    if low.lower_returns:
        body, _ = low.block(body, None)
        init = _located([_assign(low.do_return, ast.Constant(False)),
                         _assign(low.retval, _call(_ag("Undefined"), [ast.Constant(low.retval)]))], fn.body[0])
        body = init + body + _located([ast.Return(value=_call(_ag("retval"), [_name(low.retval)]))],
                                      fn.body[-1])
    else:
        body, _ = low.block(body, None) if _has_loop_jump(body) else (body, None)
    params = [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]
    params += [a.arg for a in (fn.args.vararg, fn.args.kwarg) if a is not None]
    annotate(body, set(), set(params))
    conv = _Converter(filename, low.taken)
    new = []
    for s in body:
        r = conv.visit(s)
        new.extend(r if isinstance(r, list) else [r])
    fn.body = new
    ast.fix_missing_locations(fn)
    return fn


def _has_loop_jump(body):
    return any(isinstance(n, (ast.Break, ast.Continue)) for s in body for n in _walk_scope(s))


def convert_function(f):
    """(converted function, converted source) for the Python function f.
    The new function shares f's globals, closure cells and defaults."""
    fn, filename = _function_ast(f)
    name = fn.name
    fn = convert_ast(fn, filename)
    code_text = ast.unparse(fn)
    free = list(f.__code__.co_freevars)
    factory = ast.FunctionDef(name="ag__factory", args=ast.arguments(
        posonlyargs=[], args=[ast.arg(arg=a) for a in ["ag__"] + free], vararg=None, kwonlyargs=[],
        kw_defaults=[], kwarg=None, defaults=[]), body=[fn, ast.Return(value=_name(name))], decorator_list=[],
        returns=None, type_comment=None)
    module = ast.Module(body=[_located([factory], fn)[0]], type_ignores=[])
    ast.fix_missing_locations(module)
    code = compile(module, filename, "exec")
    factory_code = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    inner = next(c for c in factory_code.co_consts if isinstance(c, types.CodeType) and c.co_name == name)
    from . import operators
    cells = dict(zip(f.__code__.co_freevars, f.__closure__ or ()))
    closure = tuple(cells[v] if v in cells else types.CellType(operators) for v in inner.co_freevars)
    g = types.FunctionType(inner, f.__globals__, name, f.__defaults__, closure)
    g.__kwdefaults__ = f.__kwdefaults__
    g.__dict__.update(f.__dict__)
    g.__doc__, g.__qualname__, g.__module__ = f.__doc__, f.__qualname__, f.__module__
    g.__wrapped__ = f
    return g, code_text

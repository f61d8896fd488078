"""``vkfuse.optimizers`` (also ``vkfuse.keras.optimizers``): SGD (momentum,
Nesterov), Adam and RMSprop with Keras 2's update rules and
``apply_gradients(zip(grads, vars))`` / ``minimize(loss, var_list)``.
The slots are variables of the parameters' context; a None gradient skips
its variable, as Keras does."""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from .math_ops import add, divide, multiply, sqrt, square, subtract
from .tensor import Tensor
from .variables import Variable


class Optimizer:
    def __init__(self, learning_rate: Any = 0.001, name: Optional[str] = None, **kwargs: Any) -> None:
        self.learning_rate = learning_rate
        self.iterations = 0
        self._slots: Dict[int, Dict[str, Variable]] = {}
        self.name = name or type(self).__name__

    def _lr(self) -> float:
        lr = self.learning_rate
        if callable(lr):
            lr = lr(self.iterations)
        return float(lr.numpy() if isinstance(lr, Tensor) else lr)

    def _slot(self, var: Variable, name: str) -> Variable:
        s = self._slots.setdefault(id(var), {})
        if name not in s:
            from .array_ops import zeros_like
            with var._ctx:
                s[name] = Variable(zeros_like(var), trainable=False)
        return s[name]

    def apply_gradients(self, grads_and_vars: Iterable[Tuple[Any, Variable]], name: Optional[str] = None,
                        **kwargs: Any) -> int:
        pairs = [(g, v) for g, v in grads_and_vars if g is not None]
        self.iterations += 1
        lr = self._lr()
        for g, v in pairs:
            self._update(v, g, lr)
        return self.iterations

    def minimize(self, loss: Callable[[], Any], var_list: Any, tape: Any = None) -> int:
        from .tape import GradientTape
        vs = list(var_list() if callable(var_list) else var_list)
        with GradientTape() as t:
            value = loss() if callable(loss) else loss
        return self.apply_gradients(zip(t.gradient(value, vs), vs))

    def _update(self, var: Variable, grad: Any, lr: float) -> None:
        raise NotImplementedError

    def variables(self) -> List[Variable]:
        return [v for s in self._slots.values() for v in s.values()]


class SGD(Optimizer):
    def __init__(self, learning_rate: Any = 0.01, momentum: float = 0.0, nesterov: bool = False,
                 name: Optional[str] = None, **kwargs: Any) -> None:
        super().__init__(learning_rate, name)
        self.momentum, self.nesterov = float(momentum), bool(nesterov)

    def _update(self, var: Variable, grad: Any, lr: float) -> None:
        if self.momentum == 0.0:
            var.assign_sub(multiply(grad, lr))
            return
        m = self._slot(var, "momentum")
        m.assign(subtract(multiply(m, self.momentum), multiply(grad, lr)))  # m = mu m - lr g
        if self.nesterov:
            var.assign_add(subtract(multiply(m, self.momentum), multiply(grad, lr)))
        else:
            var.assign_add(m)


class Adam(Optimizer):
    def __init__(self, learning_rate: Any = 0.001, beta_1: float = 0.9, beta_2: float = 0.999,
                 epsilon: float = 1e-7, amsgrad: bool = False, name: Optional[str] = None, **kwargs: Any) -> None:
        super().__init__(learning_rate, name)
        self.beta_1, self.beta_2, self.epsilon = float(beta_1), float(beta_2), float(epsilon)

    def _update(self, var: Variable, grad: Any, lr: float) -> None:
        m, v = self._slot(var, "m"), self._slot(var, "v")
        t = self.iterations
        m.assign(add(multiply(m, self.beta_1), multiply(grad, 1 - self.beta_1)))
        v.assign(add(multiply(v, self.beta_2), multiply(square(grad), 1 - self.beta_2)))
        alpha = lr * (1 - self.beta_2 ** t) ** 0.5 / (1 - self.beta_1 ** t)
        var.assign_sub(divide(multiply(m, alpha), add(sqrt(v), self.epsilon)))


class RMSprop(Optimizer):
    def __init__(self, learning_rate: Any = 0.001, rho: float = 0.9, momentum: float = 0.0,
                 epsilon: float = 1e-7, centered: bool = False, name: Optional[str] = None, **kwargs: Any) -> None:
        super().__init__(learning_rate, name)
        self.rho, self.epsilon = float(rho), float(epsilon)

    def _update(self, var: Variable, grad: Any, lr: float) -> None:
        ms = self._slot(var, "rms")
        ms.assign(add(multiply(ms, self.rho), multiply(square(grad), 1 - self.rho)))
        var.assign_sub(divide(multiply(grad, lr), add(sqrt(ms), self.epsilon)))


class _Keras:
    """``vkfuse.keras``: only ``optimizers`` (Keras layers and models are not available)."""

    def __init__(self) -> None:
        import types
        self.optimizers = types.SimpleNamespace(SGD=SGD, Adam=Adam, RMSprop=RMSprop, Optimizer=Optimizer)


keras = _Keras()

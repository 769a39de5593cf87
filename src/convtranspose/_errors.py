"""Exception types raised by convtranspose."""

__all__ = ["ConvTransposeError"]


class ConvTransposeError(ValueError):
    """An invalid shape or attribute for a transposed convolution.

    The message names the argument, the value received and the rule it broke.
    It subclasses :class:`ValueError`, so ``except ValueError`` also catches it.
    Mismatched or unsupported dtypes raise :class:`TypeError` instead.
    """

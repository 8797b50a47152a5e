"""`check`'s result: the findings of the conformance checker, as a list whose truth value says
whether the object conforms."""

from . import _native


class CheckReport(list):
    """The findings of ``check(obj)`` / ``check_descriptor(desc)``: a list of ``Violation``
    (errors, then warnings, as found). Its truth value is whether the object conforms to the
    spec, that is whether no finding is an error: ``if cai.check(x):`` means "x conforms", even
    with warnings (interoperability hazards, which break some consumer but no rule).
    ``errors`` and ``warnings`` split the list; ``conforms`` is its truth value by name."""

    __slots__ = ()

    @property
    def errors(self):
        """The findings that break a rule of the spec (severity ``"error"``)."""
        return [v for v in self if v.severity == "error"]

    @property
    def warnings(self):
        """The interoperability hazards (severity ``"warning"``): legal, but a consumer breaks."""
        return [v for v in self if v.severity == "warning"]

    @property
    def conforms(self):
        """Whether no finding is an error."""
        return not any(v.severity == "error" for v in self)

    def __bool__(self):
        return self.conforms

    def __repr__(self):
        state = "conforms" if self.conforms else "does not conform"
        return f"CheckReport({state}: {len(self.errors)} errors, {len(self.warnings)} warnings, {list.__repr__(self)})"


def check(obj):
    """Checks ``obj``'s ``__cuda_array_interface__`` and/or ``__array_interface__`` against the
    spec: a ``CheckReport`` of every violation (errors) and interoperability hazard (warnings),
    each a ``Violation`` with its interface, key, message, rule, rule text, severity and the
    exception a strict consumer raises. True when ``obj`` conforms. An object exposing neither
    interface is an error finding; an exception its getter raises propagates."""
    return CheckReport(_native.check(obj))


def check_descriptor(desc, interface="cuda"):
    """Checks a descriptor dict as ``interface`` (``"cuda"``: ``__cuda_array_interface__``,
    ``"host"``: ``__array_interface__``) describes it: a ``CheckReport``, as ``check`` gives."""
    return CheckReport(_native.check_descriptor(desc, interface))

"""What a run found: ``Report`` and ``Finding``, and their JSON and Markdown forms."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class Finding:
    """One deviation: the check that saw it and what it saw (with a reproduction where short)."""

    check: str
    detail: str


@dataclass
class Report:
    """The outcome of ``check(adapter)``: each check is in ``passed``, in ``skipped`` (with the
    reason in ``skip_reasons``) or has at least one entry in ``failures``. ``notes`` records
    behaviour the spec allows but a consumer must know about (e.g. no versioned capsules)."""

    library: str
    version: str = ""
    device: str = ""
    """The name of the device the library's arrays were on, where the adapter names one (the
    CUDA adapters do); empty for the CPU."""
    passed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failures: list[Finding] = field(default_factory=list)
    notes: list[Finding] = field(default_factory=list)
    skip_reasons: dict[str, str] = field(default_factory=dict)

    @property
    def failed(self) -> list[str]:
        """Names of the checks with failures, in the order they ran."""
        return list(dict.fromkeys(f.check for f in self.failures))

    def status(self, check: str) -> str:
        """``"pass"``, ``"fail"``, ``"skip"`` or ``"-"`` (not run) for one check."""
        if check in self.failed:
            return "fail"
        if check in self.passed:
            return "pass"
        if check in self.skipped:
            return "skip"
        return "-"

    def to_dict(self) -> dict:
        """A JSON-ready dict (``failed`` added)."""
        data = asdict(self)
        data["failed"] = self.failed
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Report:
        """The report ``to_dict`` described."""
        return cls(
            library=data["library"],
            version=data.get("version", ""),
            device=data.get("device", ""),
            passed=list(data.get("passed", [])),
            skipped=list(data.get("skipped", [])),
            failures=[Finding(**f) for f in data.get("failures", [])],
            notes=[Finding(**f) for f in data.get("notes", [])],
            skip_reasons=dict(data.get("skip_reasons", {})),
        )


def group_of(check: str) -> str:
    """The table column of a check: its name up to the second dot (``producer.capsule``)."""
    return ".".join(check.split(".")[:2])


def _cell(report: Report, checks: list[str]) -> str:
    states = [report.status(c) for c in checks]
    failed = states.count("fail")
    ran = len([s for s in states if s in ("pass", "fail")])
    if failed:
        return f"**{ran - failed}/{ran}**"
    if ran:
        return f"{ran}/{ran}"
    return "skip" if "skip" in states else "-"


def markdown(reports: list[Report], checks: list[str]) -> str:
    """One table (library x check group: checks passed / run, bold where some failed), then
    every failure and note with its detail."""
    groups: dict[str, list[str]] = {}
    for check in checks:
        groups.setdefault(group_of(check), []).append(check)
    lines = [
        "| library | version | " + " | ".join(groups) + " |",
        "|---|---|" + "---|" * len(groups),
    ]
    for r in reports:
        cells = [_cell(r, members) for members in groups.values()]
        lines.append(f"| {r.library} | {r.version or '-'} | " + " | ".join(cells) + " |")
    lines.append("")
    for r in reports:
        if not (r.failures or r.notes or r.skip_reasons):
            continue
        lines.append(f"### {r.library}")
        lines.append("")
        for f in r.failures:
            lines.append(f"- **{f.check}**: {f.detail}")
        for f in r.notes:
            lines.append(f"- note, {f.check}: {f.detail}")
        reasons = sorted(set(r.skip_reasons.values()))
        if reasons and not r.passed and not r.failures:
            lines.append(f"- not run: {reasons[0]}")
        elif reasons:
            skipped = ", ".join(sorted(r.skip_reasons))
            lines.append(f"- skipped: {skipped}")
        lines.append("")
    return "\n".join(lines)

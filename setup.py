"""Build hook: a wheel carries the repository's scenarios/ (the example scenarios, the suite, the replay
trace) as the package data loadgen/example_scenarios/, without a second copy in the repository.
Everything else about the package is in pyproject.toml; the lookup is loadgen/examples.py."""

from __future__ import annotations

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

SCENARIOS = Path(__file__).resolve().parent / "scenarios"
PACKAGED = ("loadgen", "example_scenarios")  # where they go in the built package


def _scenario_files() -> list[Path]:
    return sorted(
        p
        for p in SCENARIOS.rglob("*")
        if p.is_file() and not p.name.startswith(".") and "__pycache__" not in p.parts  # an example handler's
    )


class BuildPyWithScenarios(build_py):
    """build_py, then scenarios/ copied into build_lib. An editable install (`pip install -e .`) skips
    the copy: its code is the clone's, and loadgen/examples.py finds the clone's scenarios/."""

    def _copy_scenarios(self) -> bool:
        return not getattr(self, "editable_mode", False)

    def _targets(self) -> list[tuple[Path, Path]]:
        return [(src, Path(self.build_lib, *PACKAGED, src.relative_to(SCENARIOS))) for src in _scenario_files()]

    def run(self) -> None:
        super().run()
        if not self._copy_scenarios():
            return
        for src, dest in self._targets():
            self.mkpath(str(dest.parent))
            self.copy_file(str(src), str(dest))

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        outputs = list(super().get_outputs(include_bytecode))
        if self._copy_scenarios():
            outputs += [str(dest) for _, dest in self._targets()]
        return outputs


setup(cmdclass={"build_py": BuildPyWithScenarios})

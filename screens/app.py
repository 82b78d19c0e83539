"""EpdoctorApp: the modes (screens), the header state, key help and the command palette.

The app holds what every screen shares: the target flags, the diagnoses of the
last run, the current plan and the launches in flight (so one stop reaches
everything started). Screens do their I/O in thread workers and answer with the
typed messages of epdoctor.screens.messages.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from epdoctor.screens.messages import (
    DiagnosisDone,
    DiagnosisFailed,
    TargetProgress,
    TargetsResolved,
)
from textual import work
from textual.app import App, ScreenStackError
from textual.binding import Binding
from textual.command import DiscoveryHit, Hit, Hits, Provider

from epdoctor.model import Context
from epdoctor.safeio import plain


@dataclass
class Shared:
    """What the screens share (the app's model; nothing here draws)."""

    target_argv: list[str] = field(default_factory=list)  # `epdoctor diagnose`-style flags
    ctx: Context = field(default_factory=Context)
    diagnoses: list[Any] = field(default_factory=list)
    fleet: list[Any] = field(default_factory=list)
    plan: Any | None = None  # epdoctor.plan.Plan
    plan_dir: str = ""
    launch_plan: Any | None = None  # what Launch uses: --plan, or a plan written from Plan
    launches: list[Any] = field(default_factory=list)  # runs with .stop() -> list[str]
    target_label: str = "not diagnosed yet"
    target_names: list[str] = field(default_factory=list)

    def plan_label(self) -> str:
        p = self.plan
        if p is None:
            return "none"
        return (
            f"{p.input.engine} {p.input.transport} {p.input.nodes}x{p.instance} ({p.verdict.value})"
        )


class EpdoctorApp(App[int]):
    """epdoctor tui."""

    CSS_PATH = "app.tcss"
    TITLE = "epdoctor"
    ENABLE_COMMAND_PALETTE = True
    BINDINGS = [
        Binding("question_mark", "help", "Keys", key_display="?"),
        Binding("f1", "help", "Keys", show=False),
        Binding("q", "quit_or_back", "Quit", show=False),
        Binding("f2", "show('targets')", "Targets"),
        Binding("f3", "show('traps')", "Traps"),
        Binding("f4", "show('wizard')", "Plan"),
        Binding("f5", "show('launch')", "Launch"),
        Binding("f6", "show('tour')", "Tour"),
        Binding("ctrl+q", "quit", "Quit", priority=True),
    ]

    def __init__(
        self,
        target_argv: Sequence[str] = (),
        ctx: Context | None = None,
        plan_path: str | None = None,
        start: str = "targets",
        diagnose_on_start: bool = True,
    ) -> None:
        from epdoctor.screens.launch import LaunchScreen
        from epdoctor.screens.targets import TargetsScreen
        from epdoctor.screens.tour import TourScreen
        from epdoctor.screens.traps import TrapsScreen
        from epdoctor.screens.wizard import WizardScreen

        self.MODES = {
            "targets": TargetsScreen,
            "traps": TrapsScreen,
            "wizard": WizardScreen,
            "launch": LaunchScreen,
            "tour": TourScreen,
        }
        super().__init__()
        self.shared = Shared(target_argv=list(target_argv), ctx=ctx or Context())
        self.start_mode = start
        self.diagnose_on_start = diagnose_on_start
        if plan_path:
            self.shared.plan = load_plan_file(plan_path)
            self.shared.plan_dir = plan_path
            self.shared.launch_plan = self.shared.plan

    COMMANDS = App.COMMANDS | {lambda: ActionsProvider}

    def on_mount(self) -> None:
        self.update_header()
        self.switch_mode(self.start_mode)
        if self.diagnose_on_start:
            self.diagnose(self.shared.target_argv)

    def on_ready(self) -> None:
        # What exists once the first frame is drawn (modules, stylesheet, app, first screen)
        # lives as long as the app. Textual's render caches are cyclic, so while panes stream
        # a full collection runs every few seconds; frozen, these ~50k objects are not walked
        # again by each one (a pause a key press would otherwise wait behind).
        gc.collect()
        gc.freeze()

    def on_unmount(self) -> None:
        self.stop_all()  # however the app ends, nothing it started is left running
        gc.unfreeze()  # the next full collection may free what this app left behind

    # --- diagnosis (shared by the targets and tour screens) -----------------
    @work(thread=True, exclusive=True, group="diagnose")
    def diagnose(self, argv: list[str]) -> None:
        """Resolve the target flags and diagnose every target concurrently."""
        from epdoctor.screens.targets import describe_targets

        from epdoctor.diagnose import diagnose
        from epdoctor.options import parse_target_flags
        from epdoctor.redact import redact_text
        from epdoctor.requests import DiagnoseRequest, ProbeOptions
        from epdoctor.targets.selection import open_targets

        # What the screens get before a diagnosis (target names from the flags or an ssh
        # config, the header's label, an error quoting a path) passes the redactor here, as
        # a diagnosis's results do in epdoctor.diagnose: the same masked name keys a row
        # while it is probed and once it is diagnosed.
        self.shared.target_argv = list(argv)
        try:
            spec = parse_target_flags(argv)
            targets = open_targets(spec)
        except Exception as exc:  # bad flags, unreadable bundle, a provider's client error
            text = str(exc) if isinstance(exc, (ValueError, OSError)) else f"{exc}"
            self.post_message(DiagnosisFailed(redact_text(text) or type(exc).__name__))
            return
        # names came from a bundle, a hosts file or the API: redacted and cleaned of control
        # sequences (OSC 0/8/52 would retitle the window, fill the clipboard, plant a link)
        self.shared.target_label = plain(redact_text(describe_targets(targets)))
        self.post_message(TargetsResolved([plain(redact_text(t.info.name)) for t in targets]))

        def progress(target: Any, state: str) -> None:
            self.post_message(TargetProgress(plain(redact_text(target.info.name)), state))

        request = DiagnoseRequest(spec, self.shared.ctx, ProbeOptions(timeout_s=60), parallel=16)
        report = diagnose(request, targets, progress=progress)
        self.post_message(DiagnosisDone(report.diagnoses, report.fleet))

    def _forward(self, msg: Any) -> None:
        screen = getattr(self, "targets_screen", None)
        if screen is not None and screen.is_attached:
            screen.post_message(replace(msg))
        try:
            current = self.screen
        except ScreenStackError:  # the first screen is not up yet: it reads shared on mount
            return
        if current is not screen and hasattr(current, "diagnosis_changed"):
            current.diagnosis_changed()

    def on_targets_resolved(self, msg: TargetsResolved) -> None:
        self.shared.target_names = list(msg.names)
        self.shared.diagnoses, self.shared.fleet = [], []
        self.update_header()
        self._forward(msg)

    def on_target_progress(self, msg: TargetProgress) -> None:
        self._forward(msg)

    def on_diagnosis_failed(self, msg: DiagnosisFailed) -> None:
        self._forward(msg)

    def on_diagnosis_done(self, msg: DiagnosisDone) -> None:
        self.shared.diagnoses, self.shared.fleet = msg.diagnoses, msg.fleet
        self.update_header()
        self._forward(msg)

    # --- shared state -------------------------------------------------------
    def update_header(self) -> None:
        s = self.shared
        self.sub_title = plain(f"target: {s.target_label} · plan: {s.plan_label()}")

    def set_plan(self, plan: Any, directory: str = "") -> None:
        """The Plan screen's plan; with ``directory`` (written to disk) also the one Launch
        uses. A draft on the Plan screen never changes what Launch does."""
        self.shared.plan = plan
        if directory:
            self.shared.plan_dir = directory
            self.shared.launch_plan = plan
        self.update_header()

    def stop_all(self) -> list[str]:
        """Stop every launch this app started; the lines say what was done."""
        lines: list[str] = []
        for run in list(self.shared.launches):
            try:
                lines += run.stop()
            except Exception as exc:  # one failing stop must not spare the others
                lines.append(f"stop failed: {exc}")
        return lines

    # --- actions ------------------------------------------------------------
    async def action_quit(self) -> None:
        """Quit; whatever a launch started is stopped first, never left running."""
        if self.shared.launches:
            import asyncio

            self.notify("stopping everything started before quitting…")
            await asyncio.to_thread(self.stop_all)
        self.exit()

    async def action_quit_or_back(self) -> None:
        """`q`: back from a pushed screen (an explanation, a dialog), else quit (k9s, posting)."""
        if len(self.screen_stack) > 1:
            self.pop_screen()
            return
        await self.action_quit()

    def action_help(self) -> None:
        """`?` / F1: the keys of the current screen and the app-wide ones."""
        from epdoctor.screens.help import KeysScreen

        if isinstance(self.screen, KeysScreen):
            self.pop_screen()
            return
        names = {"targets": "Targets", "traps": "Traps", "wizard": "Plan", "launch": "Launch"}
        names["tour"] = "Tour"
        title = names.get(self.current_mode, "") if len(self.screen_stack) == 1 else ""
        self.push_screen(KeysScreen(self.screen, title or type(self.screen).__name__[:-6]))

    def action_show(self, mode: str) -> None:
        self.switch_mode(mode)

    def explain(self, code: str, finding: Any | None = None) -> None:
        from epdoctor.screens.explain import ExplainScreen

        from epdoctor import knowledge

        try:
            knowledge.get(code)
        except KeyError:
            self.notify(f"{code} is not in the catalogue", severity="warning")
            return
        self.push_screen(ExplainScreen(code, finding))

    def palette_actions(self) -> list[tuple[str, str, Callable[[], Any]]]:
        """(name, help, callback) for every action the palette offers."""
        acts: list[tuple[str, str, Callable[[], Any]]] = [
            ("Targets", "diagnosed nodes, facts and findings", partial(self.switch_mode, "targets")),
            ("Diagnose again", "probe the targets again", self._palette_diagnose),
            ("Traps", "the whole trap catalogue", partial(self.switch_mode, "traps")),
            ("Plan wizard", "engine, transport, instance: the verdict", partial(self.switch_mode, "wizard")),
            ("Launch", "kernel test, serve, smoke, bench", partial(self.switch_mode, "launch")),
            ("Stop everything started", "stop every launch in flight", self._palette_stop),
            ("Guided tour", "the stack, layer by layer", partial(self.switch_mode, "tour")),
            ("Quit", "leave epdoctor", self.exit),
        ]  # fmt: skip
        return acts

    def _palette_diagnose(self) -> None:
        self.switch_mode("targets")
        screen = self.screen
        if hasattr(screen, "action_diagnose"):
            screen.action_diagnose()

    def _palette_stop(self) -> None:
        lines = self.stop_all()
        self.notify("\n".join(lines) or "nothing is running")


class ActionsProvider(Provider):
    """Every app action, and `Explain CODE` for every trap in the catalogue."""

    def _entries(self) -> list[tuple[str, str, Callable[[], Any]]]:
        from epdoctor import knowledge

        app = self.app
        assert isinstance(app, EpdoctorApp)
        out = list(app.palette_actions())
        for t in knowledge.all_traps():
            out.append((f"Explain {t.code}", t.title, partial(app.explain, t.code)))
        return out

    async def discover(self) -> Hits:
        for name, help_text, cb in self._entries():
            if not name.startswith("Explain "):
                yield DiscoveryHit(name, cb, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help_text, cb in self._entries():
            score = max(matcher.match(name), matcher.match(f"{name} {help_text}") * 0.8)
            if score > 0:
                yield Hit(score, matcher.highlight(name), cb, help=help_text)


def load_plan_file(path: str) -> Any:
    """A plan.json written by `epdoctor plan -o DIR`, made again from its input."""
    from epdoctor.plan import PlanInput, make_plan
    from epdoctor.schema import load_plan_file as load_checked

    doc = load_checked(path)  # the one input boundary: bounded, regular, checked
    fields = dict(doc.get("input") or {})
    fields["hosts"] = tuple(fields.get("hosts") or ())
    known = set(PlanInput.__dataclass_fields__)
    return make_plan(PlanInput(**{k: v for k, v in fields.items() if k in known}))


def make_app(args: Any) -> EpdoctorApp:
    """The app for `epdoctor tui` (the tests build it the same way)."""
    return EpdoctorApp(
        target_argv=list(getattr(args, "target_argv", []) or []),
        ctx=Context(
            transport=getattr(args, "transport", None),
            engine=getattr(args, "engine", None),
            instance=getattr(args, "instance", None),
        ),
        plan_path=getattr(args, "plan", None),
        start=getattr(args, "start", None) or "targets",
    )

"""What every package's `_cli.py` builds its commands from: one kind of group, one kind of command, one way to
refuse a flag. Only typer's public API: `cls=` on a command, and click's documented help-formatting hooks.

Help stays plain click help (`rich_markup_mode=None`): rich would cost a third of `inferwatch --help`'s start.
"""

from __future__ import annotations

from typing import NoReturn

import typer
import typer.core

__all__ = ["Command", "LOG_LEVELS", "bad_flag", "refuse_flag", "check_log_level", "group"]

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


def _argument_name(param) -> str:
    """An argument as the user reads it: its metavar (FILE), with `...` when it takes several."""
    name = param.metavar or param.name.upper()
    return name + ("..." if param.nargs != 1 and not name.endswith("...") else "")


class Command(typer.core.TyperCommand):
    """A command whose help spells arguments as click does, in the user's words: `FILE...` when required and
    `[FILE]` when optional on the usage line, `FILE` in the list; typer would write `{FILE}...` and
    `FILE <list[Path]>`; and which names the optional extra it needs when that is not installed. Give it to every
    command: `@app.command(cls=Command)`."""

    def invoke(self, ctx):
        """Run the command, first refusing it in one line when an optional extra it needs is not installed
        (inferwatch/extras.py)."""
        from inferwatch import extras

        words, level = [], ctx
        while level.parent is not None:  # the words after `inferwatch`, whatever the program is called
            words.append(level.info_name)
            level = level.parent
        command = " ".join(reversed(words))
        extras.check(command)
        try:
            return super().invoke(ctx)
        except ModuleNotFoundError as err:
            if (missing := extras.explain(err, command)) is not None:
                raise missing from None
            raise

    def collect_usage_pieces(self, ctx) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name != "argument":
                pieces.extend(param.get_usage_pieces(ctx))
            elif param.required:
                pieces.append(_argument_name(param))
            else:
                pieces.append(f"[{param.metavar or param.name.upper()}]" + ("..." if param.nargs != 1 else ""))
        return pieces

    def format_options(self, ctx, formatter) -> None:
        sections: dict[str, list[tuple[str, str]]] = {"Arguments": [], "Options": []}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                sections["Arguments"].append((_argument_name(param), record[1]))
            else:
                sections["Options"].append(record)
        for title, rows in sections.items():
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


def group(help: str) -> typer.Typer:
    """A command group: plain help, bare `inferwatch GROUP` shows its help."""
    return typer.Typer(help=help, no_args_is_help=True, rich_markup_mode=None)


def bad_flag(flag: str, err: Exception | str) -> NoReturn:
    """A usage error that names the flag: one `error:` line and exit 2 (inferwatch/cli.py's main)."""
    raise typer.BadParameter(str(err), param_hint=flag)


def refuse_flag(flag: str, err: Exception | str) -> NoReturn:
    """A flag refused as `error: --flag VALUE: why`, exit 1: the `bad=` of options.from_flags for the commands
    whose flag errors always were InferwatchErrors (the parser's message starts with the value)."""
    from inferwatch.errors import InferwatchError

    raise InferwatchError(f"{flag} {err}")


def check_log_level(level: str) -> str:
    """--log-level as logging's name, or a usage error."""
    if level.upper() not in LOG_LEVELS:
        bad_flag("--log-level", f"{level!r}: use debug, info, warning or error")
    return level.upper()

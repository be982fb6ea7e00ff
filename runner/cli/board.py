"""The board's commands: ``ispm board serve|token create|cancel``, ``ispm submit [status|cancel]``, ``ispm verify``."""

from __future__ import annotations

from pathlib import Path

import click

from runner.cli.output import json_option, print_json

_BOARD = click.option("--board", required=True, metavar="URL", help="The board's address, e.g. https://board.example")


@click.group()
def board() -> None:
    """Run a board: it takes submissions, runs them officially, and publishes signed records.

    Example: ispm board serve board.yaml
    """


@board.command("serve")
@click.argument("config", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=int, default=8640, show_default=True, help="Port to listen on.")
@click.option("--workers", type=int, default=1, show_default=True, help="Submissions run at once by this process.")
def serve_command(config: Path, host: str, port: int, workers: int) -> None:
    """Serve the board named by CONFIG: its API, pages and run workers, until stopped.

    Example: ispm board serve board.yaml --port 8640
    """
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
    from runner.board.serve import serve_board

    serve_board(config, host=host, port=port, workers=workers)


@board.group("token")
def token() -> None:
    """Submitters' bearer tokens (stored hashed).

    Example: ispm board token create board.yaml alice
    """


@token.command("create")
@click.argument("config", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("submitter")
@click.option("--valid-days", type=float, default=None, help="Expire the token after this many days (more than 0).")
def token_create_command(config: Path, submitter: str, valid_days: float | None) -> None:
    """Create a token for SUBMITTER and print it once: give it to them as ISPM_BOARD_TOKEN.

    Example: ispm board token create board.yaml alice --valid-days 30
    """
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
    from runner.board.serve import create_board_token

    click.echo(create_board_token(config, submitter, valid_days=valid_days))


@token.command("list")
@click.argument("config", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@json_option("the tokens as a list of objects")
def token_list_command(config: Path, as_json: bool) -> None:
    """List the board's tokens: id, submitter, state, expiry and last use (never a secret).

    Example: ispm board token list board.yaml
    """
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
    from runner.board.serve import list_board_tokens
    from runner.board.tokens import token_lines

    tokens = list_board_tokens(config)
    if as_json:
        print_json([t.model_dump(mode="json") for t in tokens])
    else:
        for line in token_lines(tokens):
            click.echo(line)


@token.command("revoke")
@click.argument("config", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("token_id", type=int)
def token_revoke_command(config: Path, token_id: int) -> None:
    """Revoke token TOKEN_ID (from `ispm board token list`): a running board refuses it from the next request.

    Example: ispm board token revoke board.yaml 3
    """
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
    from runner.board.serve import revoke_board_token

    revoked = revoke_board_token(config, token_id)
    click.echo(f"token {revoked.id} ({revoked.submitter}): revoked")


@board.command("cancel")
@click.argument("config", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("submission_id", type=int)
@click.option("--reason", "why", default=None, help="Why, shown with the submission.")
def board_cancel_command(config: Path, submission_id: int, why: str | None) -> None:
    """Cancel any submission not yet being published, as the board's admin; a running one stops within a heartbeat.

    Example: ispm board cancel board.yaml 3 --reason "abusive image"
    """
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
    from runner.board.serve import cancel_as_admin

    click.echo(cancel_as_admin(config, submission_id, why=why))


@click.group("submit", invoke_without_command=True)
@click.option("--board", "board_url", metavar="URL", help="The board's address.")
@click.option("--agent-image", metavar="IMAGE", help="The agent image to upload (docker save).")
@click.option("--candidate", metavar="MODEL", help="The model under test: one the board serves.")
@click.option("--name", help="The name shown on the leaderboard.")
@click.option("--link", "links", multiple=True, metavar="URL", help="A link shown with the run (repeatable).")
@click.pass_context
def submit(
    ctx: click.Context,
    board_url: str | None,
    agent_image: str | None,
    candidate: str | None,
    name: str | None,
    links: tuple[str, ...],
) -> None:
    """Submit an agent image to a board, which runs it officially; the token comes from ISPM_BOARD_TOKEN.

    Example: ispm submit --board https://board.example --agent-image my/agent:1 --candidate openai/gpt-4.1 --name Mine
    """
    if ctx.invoked_subcommand is not None:
        return
    missing = [
        flag
        for flag, value in (
            ("--board", board_url),
            ("--agent-image", agent_image),
            ("--candidate", candidate),
            ("--name", name),
        )
        if not value
    ]
    if missing:
        raise click.UsageError(f"missing {', '.join(missing)}")
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
    from runner.board.client import submit_with_progress

    assert board_url and agent_image and candidate and name  # checked above
    made = submit_with_progress(board_url, agent_image, candidate, name, links=list(links))
    click.echo(f"submission {made['id']}: {made['status_url']}")


@submit.command("status")
@click.argument("submission_id", type=int)
@_BOARD
@click.option("--watch", is_flag=True, help="Follow it until it is published, failed or cancelled.")
@json_option("the submission as an object")
def status_command(submission_id: int, board: str, watch: bool, as_json: bool) -> None:
    """Print a submission's state and progress.

    Example: ispm submit status 3 --board https://board.example --watch
    """
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
    from runner.board.client import status_line, submission_status, watch_submission

    if watch:
        last = watch_submission(
            board, submission_id, on_change=None if as_json else lambda s: click.echo(status_line(s))
        )
        if as_json:
            print_json(last)
        return
    status = submission_status(board, submission_id)
    print_json(status) if as_json else click.echo(status_line(status))


@submit.command("cancel")
@click.argument("submission_id", type=int)
@_BOARD
def cancel_command(submission_id: int, board: str) -> None:
    """Cancel a submission of yours that is not yet being published; a running one stops, and nothing is published.

    Example: ispm submit cancel 3 --board https://board.example
    """
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
    from runner.board.client import cancel_submission, status_line

    click.echo(status_line(cancel_submission(board, submission_id)))


@click.command("verify")
@click.argument("bundle", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--key",
    "key_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The board's public key (served at /api/v1/key).",
)
@click.option(
    "--statement",
    "statement_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The signed statement (default: beside the bundle).",
)
@click.option(
    "--signature",
    "signature_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Its signature (default: beside the bundle).",
)
@json_option("the verification report as an object")
def verify_command(
    bundle: Path, key_path: Path, statement_path: Path | None, signature_path: Path | None, as_json: bool
) -> None:
    """Check a published run's signature with the board's key, then audit the whole bundle offline; exit 1 naming
    what fails.

    Example: ispm verify run.tar.gz --key board.pub
    """
    # Loaded when the command runs, not at ispm's start-up (runner.cli).
    from runner.record.verify import verify

    report = verify(bundle, key_path, statement_path=statement_path, signature_path=signature_path)
    if as_json:
        print_json(report)
    else:
        for line in report.summary_lines():
            click.echo(line)
    if not report.ok:
        raise click.exceptions.Exit(1)

"""`attnprof sweep`, `attnprof results` and `attnprof recommend`: thin layers over attnprof.sweep,
attnprof.store and attnprof.recommend. Progress goes to stderr, results to stdout."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from attnprof.cli import app
from attnprof.cli.options import NoColor, Variants
from attnprof.errors import Interrupted

if TYPE_CHECKING:
    from attnprof.report.sweep_view import SweepProgress
    from attnprof.sweep import SweepConfig

__all__: list[str] = []

StoreOpt = Annotated[Path, typer.Option("--store", help="SQLite results store.")]


@app.command("sweep")
def sweep_command(
    config: Annotated[Path | None, typer.Argument(help="A sweep TOML file (flags override it).")] = None,
    batch: Annotated[str | None, typer.Option("-b", "--batch", help="Batch sizes, e.g. 1,8.")] = None,
    heads: Annotated[str | None, typer.Option("-H", "--heads", help="Query heads, e.g. 8,16.")] = None,
    kv_heads: Annotated[
        str | None, typer.Option("--kv-heads", help="KV heads (GQA); 0 = same as heads.")
    ] = None,
    seq: Annotated[str | None, typer.Option("-s", "--seq", help="Query lengths, e.g. 512,1024,2048.")] = None,
    kv_seq: Annotated[str | None, typer.Option("--kv-seq", help="KV lengths; 0 = same as seq.")] = None,
    head_dim: Annotated[str | None, typer.Option("-d", "--head-dim", help="Head dims, e.g. 64,128.")] = None,
    dtype: Annotated[str | None, typer.Option("--dtype", help="Dtypes, e.g. fp32,bf16.")] = None,
    causal: Annotated[str | None, typer.Option("--causal", help="true, false or both.")] = None,
    mask: Annotated[
        list[str] | None,
        typer.Option(
            "--mask",
            help="Masks (repeat, or separate by ';'): causal, none, sliding=W, prefix=P, document=N, "
            "padding=L1,L2,..., alibi, bias.",
        ),
    ] = None,
    backward: Annotated[
        str | None, typer.Option("--backward", help="false, true or both (forward + backward).")
    ] = None,
    phase: Annotated[
        str | None,
        typer.Option("--phase", help="prefill, decode or both; in decode --seq is the new queries per step."),
    ] = None,
    variants: Variants = None,
    compile: Annotated[
        str | None, typer.Option("--compile", help="false, true or both (torch.compile twins).")
    ] = None,
    device: Annotated[
        str | None,
        typer.Option(
            "--device",
            help="auto (default: cuda if there is a GPU), cpu, cuda (one worker per GPU) or cuda:N.",
        ),
    ] = None,
    store: Annotated[
        Path | None, typer.Option("--store", help="SQLite results store (default ./attnprof-results.db).")
    ] = None,
    executor: Annotated[str | None, typer.Option("--executor", help="local or ray.")] = None,
    ray_address: Annotated[
        str | None, typer.Option("--ray-address", help="Ray cluster address (default: a local instance).")
    ] = None,
    ray_num_cpus: Annotated[float | None, typer.Option("--ray-num-cpus", help="CPUs per Ray task.")] = None,
    workers: Annotated[
        int | None, typer.Option("--workers", help="Worker processes (default: one per GPU, 1 on CPU).")
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            help="Seconds per job before its worker is killed (default: none; a config's 0 = none).",
        ),
    ] = None,
    keep_traces: Annotated[
        Path | None, typer.Option("--keep-traces", help="Keep every job's trace under this folder.")
    ] = None,
    tensorboard: Annotated[
        Path | None,
        typer.Option(
            "--tensorboard",
            metavar="DIR",
            help="Also write every job's traces as tensorboard_trace_handler does, one sub-folder per job.",
        ),
    ] = None,
    time_budget: Annotated[
        float | None, typer.Option("--time-budget", help="Seconds of clean timing per job.")
    ] = None,
    min_samples: Annotated[
        int | None, typer.Option("--min-samples", help="Fewest timing samples per job.")
    ] = None,
    warmup: Annotated[
        float | None, typer.Option("--warmup", help="Seconds of warm-up before each job's clean timing.")
    ] = None,
    no_profile: Annotated[
        bool, typer.Option("--no-profile", help="Time only: no profiler pass (no ops/forward).")
    ] = False,
    retry: Annotated[
        str | None,
        typer.Option("--retry", help="Run jobs stored with these statuses again, e.g. crashed,timeout."),
    ] = None,
    print_config: Annotated[
        bool, typer.Option("--print-config", help="Print the expanded grid and job count; run nothing.")
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="No progress bar.")] = False,
    # run's boolean spellings, hidden: `sweep --no-causal` is `--causal false` as in `run --no-causal`
    no_causal: Annotated[bool, typer.Option("--no-causal", hidden=True)] = False,
    no_compile: Annotated[bool, typer.Option("--no-compile", hidden=True)] = False,
    no_backward: Annotated[bool, typer.Option("--no-backward", hidden=True)] = False,
) -> None:
    """Run a grid of (configuration, variant) jobs in isolated workers; store every result; resume."""
    from attnprof.api.sweep import SweepFlags, SweepRequest, nothing_useful

    flags = SweepFlags(
        config=config, batch=batch, heads=heads, kv_heads=kv_heads, seq=seq, kv_seq=kv_seq,
        head_dim=head_dim, dtype=dtype, causal=causal, mask=mask, backward=backward, phase=phase,
        variants=variants, compile=compile, device=device, store=store, executor=executor,
        ray_address=ray_address, ray_num_cpus=ray_num_cpus, workers=workers, timeout=timeout,
        keep_traces=keep_traces, tensorboard=tensorboard, time_budget=time_budget,
        min_samples=min_samples, warmup=warmup, no_profile=no_profile, retry=retry,
        print_config=print_config, json_out=json_out, no_causal=no_causal, no_compile=no_compile,
        no_backward=no_backward,
    )  # fmt: skip
    req = SweepRequest.from_flags(flags)
    if req.print_config:
        sys.stdout.write(req.render_config())
        return
    for note in req.notes:
        sys.stderr.write(f"note: {note}\n")
    from attnprof.report.sweep_view import SweepProgress, print_summary, summary_dict

    reporter = SweepProgress(enabled=not no_progress and not json_out)
    try:
        summary = req.execute(on_start=reporter.start, on_result=reporter.update)
    except KeyboardInterrupt:
        reporter.stop()
        raise _interrupted(req.config, reporter) from None
    finally:
        reporter.stop()
    if json_out:
        sys.stdout.write(json.dumps(summary_dict(summary), indent=2) + "\n")
    else:
        print_summary(summary)
    if (err := nothing_useful(summary)) is not None:
        raise err


def _interrupted(cfg: SweepConfig, reporter: SweepProgress) -> Interrupted:
    """Ctrl-C or SIGTERM: every finished job is already committed; say how many, and how to go on."""
    import shlex

    from attnprof.cli import invoked_args

    store = cfg.sweep.store
    if reporter.total is None:
        return Interrupted(f"interrupted before the first job; nothing was added to {store}")
    done = reporter.already + reporter.ran
    return Interrupted(
        f"interrupted: {reporter.ran} result(s) stored in {store} by this sweep, {done} of "
        f"{reporter.total} job(s) done; resume with: attnprof {shlex.join(invoked_args())}"
    )


@app.command("results")
def results_command(
    store: StoreOpt = Path("attnprof-results.db"),
    fmt: Annotated[str, typer.Option("--format", "-f", help="table, csv, json or parquet.")] = "table",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", "--out", help="Write to this file (needed for parquet).")
    ] = None,
    variant: Annotated[
        str | None, typer.Option("--variants", "-v", "--variant", help="Only these variants (comma list).")
    ] = None,
    status: Annotated[
        str | None, typer.Option("--status", help="Only these statuses, e.g. ok or crashed,timeout.")
    ] = None,
    dtype: Annotated[str | None, typer.Option("--dtype", help="Only these dtypes.")] = None,
    # the shape filters are spelled as run's and sweep's shape options, short names included
    seq: Annotated[str | None, typer.Option("-s", "--seq", help="Only these query lengths.")] = None,
    head_dim: Annotated[str | None, typer.Option("-d", "--head-dim", help="Only these head dims.")] = None,
    batch: Annotated[str | None, typer.Option("-b", "--batch", help="Only these batch sizes.")] = None,
    heads: Annotated[str | None, typer.Option("-H", "--heads", help="Only these head counts.")] = None,
    device: Annotated[str | None, typer.Option("--device", help="Only these devices.")] = None,
    causal: Annotated[str | None, typer.Option("--causal", help="true or false.")] = None,
    samples: Annotated[
        bool, typer.Option("--samples", help="json/parquet: include the raw timing samples.")
    ] = False,
    no_color: NoColor = False,
) -> None:
    """List, filter and export the results in a store."""
    from attnprof.api.sweep import ResultsRequest
    from attnprof.outputs import write_atomic
    from attnprof.store.export import export_rows

    lists = {
        "variant": variant, "status": status, "dtype": dtype, "seq": seq, "head_dim": head_dim,
        "batch": batch, "heads": heads, "device": device,
    }  # fmt: skip
    req = ResultsRequest.from_flags(
        store, fmt=fmt, output=output, samples=samples, lists=lists, causal=causal
    )
    rows = req.rows()
    if fmt == "table":
        from attnprof.report.console import MAX_TTY_WIDTH, make_console
        from attnprof.report.sweep_view import print_results

        if output is None:
            print_results(make_console(no_color=no_color), rows, store)
            return
        # on screen the table fits 100 columns; written to a file, the notes below it keep to one line
        import io

        buf = io.StringIO()
        print_results(make_console(file=buf, width=MAX_TTY_WIDTH), rows, store)
        write_atomic(output, buf.getvalue(), option="-o/--output")
        return
    text = export_rows(rows, fmt, path=output, samples=samples)
    if text is not None:
        sys.stdout.write(text)
    else:
        sys.stderr.write(f"wrote {len(rows)} result(s) to {output}\n")


# -- recommend --------------------------------------------------------------------------------


@app.command("recommend")
def recommend_command(
    store: StoreOpt = Path("attnprof-results.db"),
    json_out: Annotated[bool, typer.Option("--json", help="Print the recommendations as JSON.")] = False,
    policy_out: Annotated[
        Path | None, typer.Option("--policy-out", help="Write a policy file for attnprof.policy.")
    ] = None,
    no_color: NoColor = False,
) -> None:
    """Name the fastest correct variant per (device, dtype, shape bucket); flag PyTorch's own choice.

    For each bucket: the winner, its margin over the runner-up, the fastest pinned SDPA backend,
    and the backend PyTorch's own dispatch picks, flagged where they differ."""
    import msgspec

    from attnprof.api.sweep import RecommendRequest

    got = RecommendRequest.from_flags(store, policy_out=policy_out).run()
    recs, left_out = got.recommendations, got.left_out
    if json_out:
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(recs), indent=2).decode() + "\n")
        return
    from attnprof.report.console import make_console
    from attnprof.report.sweep_view import print_recommendations

    con = make_console(no_color=no_color)
    print_recommendations(con, recs)
    if policy_out is not None:
        con.print(
            f"policy written to {policy_out} (apply it with attnprof.policy.scaled_dot_product_attention)"
        )
        if left_out:
            con.print(
                f"no rule for {len(left_out)} bucket(s) with a mask other than causal or none, or with the "
                f"backward ({'; '.join(left_out)}): attnprof.policy matches plain forwards only",
                markup=False,  # the labels' [cpu] is text, not rich markup
            )

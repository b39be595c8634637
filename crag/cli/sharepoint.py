"""`python -m crag.cli.ingest --source sharepoint --site SITE [--drive LIB] [--folder PATH] [--target ...]`.

Exit codes: 0 synced; 2 the settings are wrong (missing or rejected credentials, unknown site,
library or folder, missing permissions); 1 a service failed (throttled, unreachable, 5xx). Every
failure is one line on stderr that says what to check, never a stack trace.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from tqdm import tqdm

from crag.config.engine_settings import CragSettings
from crag.ingest.sharepoint.sync import SyncReport
from crag.providers.graph.client import GraphClient, GraphError
from crag.retrieval.search.azure import SearchUnavailable

log = logging.getLogger(__name__)


class _Bars:
    """One tqdm bar per stage of a sync (changes read, permissions, downloads), on stderr."""

    def __init__(self) -> None:
        self._bars: dict[str, tqdm[object]] = {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        bar = self._bars.get(stage)
        if bar is None:
            unit = {"changes": "item", "permissions": "file", "downloads": "file"}.get(stage, "step")
            bar = self._bars[stage] = tqdm(unit=unit, file=sys.stderr, desc=stage)
        if total:
            bar.total = total
        bar.update(done - bar.n)

    def close(self) -> None:
        for bar in self._bars.values():
            bar.close()


async def run(
    settings: CragSettings,
    target: str,
    index_dir: Path | None = None,
    full: bool = False,
    **credential_options: object,
) -> int:
    """Sync once; credential_options go to the credential (tests: the fake authority's CA)."""
    try:
        client = GraphClient(settings.graph, **credential_options)
    except GraphError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    bars = _Bars()
    try:
        if target == "azure":
            from crag.ingest.sharepoint.azure import sync_to_azure

            done = await sync_to_azure(settings, client, full=full, progress=bars, upload_progress=bars)
            bars.close()
            _print_sync(done.result.report, done.result.skipped)
            print(
                f"index {settings.azure_search.index or 'crag-chunks'}: {done.index.uploaded_chunks} chunks "
                f"uploaded, {done.index.deleted_chunks} deleted; sync state in {done.state_path}"
            )
            return 0
        from crag.cli.ingest import ingest_local
        from crag.ingest.sharepoint.local import sync_to_local

        local = settings.for_sharepoint(index_dir)
        synced = await sync_to_local(local, client, full=full, progress=bars, build_progress=bars)
        bars.close()
        _print_sync(synced.result.report, synced.result.skipped)
        if synced.index is None:
            print(f"index {local.index_dir} is up to date")
        # The vectors, as after a folder ingest (unchanged texts reuse theirs).
        return await ingest_local(local.model_copy(update={"search_provider": "local"}), quiet=True)
    except GraphError as exc:
        bars.close()
        hint = ""
        if exc.kind == "throttled" and exc.retry_after:
            hint = f"; try again in {exc.retry_after:.0f}s"
        print(f"error: {exc}{hint}", file=sys.stderr)
        log.warning("SharePoint sync failed: %s", exc)
        return 2 if exc.is_settings else 1
    except ValueError as exc:  # Azure AI Search settings
        bars.close()
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except SearchUnavailable as exc:
        bars.close()
        print(f"error: Azure AI Search: {exc}", file=sys.stderr)
        return 1
    finally:
        await client.close()


def _print_sync(report: SyncReport, skipped: list[str]) -> None:
    print(f"SharePoint: {report.summary()}")
    if skipped:
        print(f"skipped {len(skipped)} file(s):")
        for reason in skipped:
            print(f"  - {reason}")
    if report.unmapped:
        print(
            "permissions not mapped to Entra ids (nobody gets access through them; see docs/sharepoint.md):"
        )
        for grant, files in sorted(report.unmapped.items()):
            print(f"  - {grant}: on {files} file(s)")

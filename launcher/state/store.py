"""The state dir: last-good records, last log facts, history and locks, the one place for their paths.

Every state file's name is spelled here and nowhere else in `launcher/` (a unit test keeps it so);
the modules that own a file ask the store for its path. The layout (docs/architecture.md "State dir"
points here):
    STATE/history.jsonl                           starts, gate results, promotions, rollbacks
    STATE/profiles/NAME/last_good.json            the promoted plan: argv, env, fingerprint, resolved profile
    STATE/profiles/NAME/previous_good.json        promoted before last-good; a wedge rolls back to it
    STATE/profiles/NAME/incidents/                the serving watch's evidence, kept before it acted
    STATE/profiles/NAME/rejected.json             candidates the gates rejected: a cold start serves last-good
    STATE/profiles/NAME/last_facts.json           log facts of the last start (KV pool, capture, outcome)
    STATE/profiles/NAME/status.json               what `launch status` reads
    STATE/profiles/NAME/launcher.lock|json        one launcher per profile, and its pid
    STATE/profiles/NAME/restart_guard.json        failed starts per candidate fingerprint
    STATE/profiles/NAME/*.corrupt-TIME            a corrupt state file, kept aside (`launch status` lists it)
    STATE/profiles/NAME/logs/engine.log|try.log   vLLM's own log
    STATE/profiles/NAME/reloads/                  reload requests and their verdicts
    STATE/profiles/NAME/change.lock               one `set`/`rollback` at a time (change_lock.py)
    STATE/profiles/NAME/pruned.jsonl              the `.bak_*`/`.replaced-*` files `set`/`rollback` removed
    STATE/profiles/NAME/frontdoor/                the front door (`launch frontdoor`): caddy.json, its
                                                  config; upstream, where it sends traffic; admin.sock;
                                                  frontdoor.lock, one door per profile; caddy/, Caddy's own
    STATE/locks/gpu-ID.lock                       one model per GPU set
    STATE/probe/journal.json, probe.lock          a running probe's plan, and its lock
    STATE/probe/restored-launcher.log             the launcher a probe's recovery started
    STATE/bug-reports/                            what `launch` writes when it hits a bug
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launcher.atomicfile import write_atomic
from launcher.errors import BadInput
from launcher.state.records import LAST_GOOD, LAST_GOOD_OPTIONAL, LAST_GOOD_SEEN, read_record

CORRUPT = ".corrupt-"  # a state file kept aside: NAME.corrupt-20261206T112852Z
KEEP_REJECTED = 50  # rejected fingerprints remembered per profile
BUG_REPORTS = "bug-reports"  # also the fallback's name in the temp dir, when the state dir is not writable


@dataclass(frozen=True, slots=True)
class StateStore:
    root: Path
    # The write seam: the serve loop passes one that queues a failed write for a retry.
    write: Callable[[Path, str], None] = field(default=write_atomic)

    # ---- paths: the layout above, spelled once -------------------------------------------------
    @property
    def profiles_root(self) -> Path:
        """One directory per profile that was ever started (`launch status` lists them)."""
        return self.root / "profiles"

    def profile_dir(self, profile: str) -> Path:
        return self.profiles_root / profile

    def engine_log(self, profile: str, *, try_run: bool = False) -> Path:
        """vLLM's own log: the server's (`engine.log`, rotated) or the last `launch try`'s (`try.log`)."""
        return self.profile_dir(profile) / "logs" / ("try.log" if try_run else "engine.log")

    @property
    def history_path(self) -> Path:
        return self.root / "history.jsonl"

    def status_path(self, profile: str) -> Path:
        return self.profile_dir(profile) / "status.json"

    def last_good_path(self, profile: str) -> Path:
        return self.profile_dir(profile) / "last_good.json"

    def previous_good_path(self, profile: str) -> Path:
        return self.profile_dir(profile) / "previous_good.json"

    def rejected_path(self, profile: str) -> Path:
        return self.profile_dir(profile) / "rejected.json"

    def incidents_dir(self, profile: str) -> Path:
        return self.profile_dir(profile) / "incidents"

    def last_facts_path(self, profile: str) -> Path:
        return self.profile_dir(profile) / "last_facts.json"

    def launcher_lock_path(self, profile: str) -> Path:
        """The flock one launcher per profile holds for its life."""
        return self.profile_dir(profile) / "launcher.lock"

    def launcher_info_path(self, profile: str) -> Path:
        """Who holds that lock: the launcher's pid and start time."""
        return self.profile_dir(profile) / "launcher.json"

    def restart_guard_path(self, profile: str) -> Path:
        return self.profile_dir(profile) / "restart_guard.json"

    def change_lock_path(self, profile: str) -> Path:
        """The flock `launch set` / `launch rollback` hold from reading the profile to their verdict."""
        return self.profile_dir(profile) / "change.lock"

    def pruned_path(self, profile: str) -> Path:
        """What `launch set` and `launch rollback` pruned from the profiles dir, one line a prune."""
        return self.profile_dir(profile) / "pruned.jsonl"

    def reloads_dir(self, profile: str) -> Path:
        """Reload requests and their verdicts, one file each (`supervisor/reload_requests.py`)."""
        return self.profile_dir(profile) / "reloads"

    def frontdoor_dir(self, profile: str) -> Path:
        """The front door's files (launcher/frontdoor/), and Caddy's own data (XDG dirs) under it."""
        return self.profile_dir(profile) / "frontdoor"

    def frontdoor_config_path(self, profile: str) -> Path:
        """The Caddy config `launch frontdoor` rendered and runs."""
        return self.frontdoor_dir(profile) / "caddy.json"

    def frontdoor_target_path(self, profile: str) -> Path:
        """Where the front door sends traffic: an engine's `HOST:PORT`, or the hold socket."""
        return self.frontdoor_dir(profile) / "upstream"

    def frontdoor_admin_socket(self, profile: str) -> Path:
        """The admin API's default unix socket."""
        return self.frontdoor_dir(profile) / "admin.sock"

    def frontdoor_hold_socket(self, profile: str) -> Path:
        """A socket nothing listens on: pointed here, the door holds requests until hold_s."""
        return self.frontdoor_dir(profile) / "hold.sock"

    def frontdoor_lock_path(self, profile: str) -> Path:
        """The flock a running front door holds (inherited by Caddy across the exec)."""
        return self.frontdoor_dir(profile) / "frontdoor.lock"

    def gpu_lock_path(self, gpu: str) -> Path:
        """One lock file per GPU (an index or a UUID), its name made safe for the file system."""
        safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in gpu)
        return self.root / "locks" / f"gpu-{safe}.lock"

    def gpu_load_lock_path(self, gpu: str) -> Path:
        """Held while an engine loads on that GPU: never two loads at once on one GPU (its power)."""
        lock = self.gpu_lock_path(gpu)
        return lock.with_name(lock.name.replace(".lock", ".loading"))

    def power_caps_path(self, profile: str) -> Path:
        """The power limits a trial beside production lowered, and what they were: restored after it
        (and by the next start when a launcher was killed meanwhile)."""
        return self.profile_dir(profile) / "power_caps.json"

    @property
    def probe_dir(self) -> Path:
        return self.root / "probe"

    @property
    def probe_journal_path(self) -> Path:
        return self.probe_dir / "journal.json"

    @property
    def probe_lock_path(self) -> Path:
        return self.probe_dir / "probe.lock"

    @property
    def probe_restore_log_path(self) -> Path:
        """The log of the launcher that a probe's recovery started to bring production back."""
        return self.probe_dir / "restored-launcher.log"

    @property
    def bug_reports_dir(self) -> Path:
        return self.root / BUG_REPORTS

    # ---- records ---------------------------------------------------------------------------------
    def last_good(self, profile: str) -> dict[str, Any] | None:
        """The promoted record as far as a diff needs it: argv, env, fingerprint (BadInput naming
        the file when corrupt)."""
        return read_record(self.last_good_path(profile), LAST_GOOD_SEEN)

    def last_good_to_start(self, profile: str) -> dict[str, Any] | None:
        """The promoted record, checked field by field as `Candidate.from_record` needs it."""
        return read_record(self.last_good_path(profile), LAST_GOOD, LAST_GOOD_OPTIONAL)

    def write_last_good(self, profile: str, record: dict[str, Any]) -> None:
        self._write(self.last_good_path(profile), record)

    def rejected(self, profile: str) -> dict[str, Any]:
        """Fingerprint → {reason, at, label} of each candidate the gates rejected (none: {})."""
        found = read_record(self.rejected_path(profile), {}) or {}
        if not all(isinstance(entry, dict) for entry in found.values()):
            raise BadInput(f"state file {self.rejected_path(profile)} is corrupt (an entry is not an object)")
        return found

    def rejected_or_set_aside(self, profile: str, now: float) -> tuple[dict[str, Any], str | None]:
        """The rejected list; when it is corrupt, {} and, in words, that it was kept aside for the
        operator (`rejected.json.corrupt-<time>`): which launches it named is unknown from now on."""
        try:
            return self.rejected(profile), None
        except BadInput as err:
            return {}, self.set_aside(self.rejected_path(profile), err.message, now)

    def set_aside(self, path: Path, why: str, now: float) -> str:
        """A corrupt state file moved out of its reader's way, kept beside it as NAME.corrupt-<time>
        (never deleted: the operator may want to know what was in it); what was done, in words."""
        why = why.removesuffix("; nothing was changed")
        aside = path.with_name(f"{path.name}{CORRUPT}{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(now))}")
        try:
            os.rename(path, aside)
        except OSError as err:
            return f"{why}; it could not be kept aside ({err.strerror or err})"
        return f"{why}; kept as {aside.name}"

    def set_aside_files(self, profile: str) -> list[Path]:
        """The corrupt state files kept aside for this profile, oldest name first."""
        return sorted(self.profile_dir(profile).glob(f"*{CORRUPT}*"))

    def write_rejected(self, profile: str, rejected: dict[str, Any]) -> None:
        newest = sorted(rejected.items(), key=lambda item: str(item[1].get("at", "")))[-KEEP_REJECTED:]
        self._write(self.rejected_path(profile), dict(newest))

    def previous_good_to_start(self, profile: str) -> dict[str, Any] | None:
        """The launch promoted before last-good, checked as last-good is (None when there is none)."""
        return read_record(self.previous_good_path(profile), LAST_GOOD, LAST_GOOD_OPTIONAL)

    def write_previous_good(self, profile: str, record: dict[str, Any]) -> None:
        self._write(self.previous_good_path(profile), record)

    def last_facts(self, profile: str) -> dict[str, Any] | None:
        return read_record(self.last_facts_path(profile), {})

    def write_last_facts(self, profile: str, facts: dict[str, Any]) -> None:
        self._write(self.last_facts_path(profile), facts)

    def _write(self, path: Path, data: dict[str, Any]) -> None:
        self.write(path, json.dumps(data, indent=2, sort_keys=True) + "\n")

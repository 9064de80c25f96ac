"""tests/test_shell.py's session tests once more, with bash inside bubblewrap
(workspace-write, network off: this folder's `shell` and `settings` fixtures).

The subset: every test of a live session's behaviour that the sandbox could
change — persistence of cwd/env/functions, exit codes, stdout/stderr apart and
streamed, multi-line text and syntax errors, stdin at EOF, timeout/cancel/interrupt/
kill with the whole command tree (grandchildren included) killed, bash ignoring
SIGINT (replaced), serialized runs, `exit` and `restart`, run after `close`, 50 MB
of output bounded and spilled, the session's environment and `$SYNAPSE_HOME/bin`
wrappers. Left out: tests that build their own unsandboxed settings
(`test_timeout_none_uses_the_setting`), the pure `bound_text`/`BoundedCapture`
unit tests (no shell), and `test_close_leaves_no_process_behind`, whose count of
session members (4) is one short with bwrap in the tree:
test_sandbox_confinement.py has a sandboxed version."""

from __future__ import annotations

import shutil

import pytest

from tests.test_shell import (
    test_a_broken_sink_does_not_break_the_session,
    test_big_stderr_is_bounded_too,
    test_cancel_kills_the_family_and_keeps_the_session,
    test_cat_without_arguments_gets_eof,
    test_concurrent_runs_are_serialized,
    test_cwd_and_exported_variables_persist,
    test_exit_code_is_returned,
    test_exit_is_reported_and_the_next_command_gets_a_fresh_shell,
    test_fifty_megabytes_are_bounded_and_spilled_in_full,
    test_functions_and_aliases_persist,
    test_interrupt_is_ctrl_c_and_does_not_hang,
    test_interrupt_when_bash_itself_ignores_sigint,
    test_kill_stops_the_command_at_once,
    test_live_output_reaches_the_sink_in_full,
    test_multi_line_commands_and_heredocs,
    test_output_without_final_newline_and_bad_utf8,
    test_read_does_not_hang,
    test_restart_ends_a_running_command,
    test_restart_gives_a_fresh_environment,
    test_run_after_close_is_a_clear_error,
    test_session_environment,
    test_sigint_ignoring_command_is_killed_after_interrupt,
    test_stdout_and_stderr_are_kept_apart,
    test_syntax_error_is_an_error_not_a_dead_session,
    test_timeout_kills_child_and_grandchild_and_keeps_the_session,
    test_timeout_of_a_loop_in_bash_itself,
    test_wrappers_in_bin_dir_run_by_name,
)

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed on this machine"
)

__all__ = [
    "test_a_broken_sink_does_not_break_the_session",
    "test_big_stderr_is_bounded_too",
    "test_cancel_kills_the_family_and_keeps_the_session",
    "test_cat_without_arguments_gets_eof",
    "test_concurrent_runs_are_serialized",
    "test_cwd_and_exported_variables_persist",
    "test_exit_code_is_returned",
    "test_exit_is_reported_and_the_next_command_gets_a_fresh_shell",
    "test_fifty_megabytes_are_bounded_and_spilled_in_full",
    "test_functions_and_aliases_persist",
    "test_interrupt_is_ctrl_c_and_does_not_hang",
    "test_interrupt_when_bash_itself_ignores_sigint",
    "test_kill_stops_the_command_at_once",
    "test_live_output_reaches_the_sink_in_full",
    "test_multi_line_commands_and_heredocs",
    "test_output_without_final_newline_and_bad_utf8",
    "test_read_does_not_hang",
    "test_restart_ends_a_running_command",
    "test_restart_gives_a_fresh_environment",
    "test_run_after_close_is_a_clear_error",
    "test_session_environment",
    "test_sigint_ignoring_command_is_killed_after_interrupt",
    "test_stdout_and_stderr_are_kept_apart",
    "test_syntax_error_is_an_error_not_a_dead_session",
    "test_timeout_kills_child_and_grandchild_and_keeps_the_session",
    "test_timeout_of_a_loop_in_bash_itself",
    "test_wrappers_in_bin_dir_run_by_name",
]

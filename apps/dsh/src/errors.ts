import { DshError } from '@dsh/context'

/**
 * - `CLI_USAGE`: a bad option, option value or argument count (exit 2).
 * - `CLI_UNKNOWN_COMMAND`: no such command (exit 2).
 * - `CLI_ROOT_INVALID`: `--root` is not a dsh session root (missing, a file, or
 *   a directory without a root marker) for a command that needs one, or `demo`
 *   pointed at a non-empty directory it did not make. Nothing is created.
 * - `CLI_TOKEN_INVALID`: `serve`'s token file is missing, empty, not a regular
 *   file (a symlink, FIFO or device: refused before it is read), readable
 *   by group/others (it must be 0600), or of more than one line.
 * - `CLI_STORE_NOT_EMPTY`: `demo` on a root it made, or `demo --store` on a
 *   database, that holds sessions the demo did not make (it only ever
 *   deletes its own). Nothing is changed.
 * - `CLI_DEMO_FAILED`: the demo could not stage its scenario (its crash worker
 *   exited before it was killed, or the killed worker's connections never
 *   closed). Rerun; nothing outside the demo's own sessions was touched.
 * - `CLI_SEARCH_UNAVAILABLE`: `search` on a root without a query index (run
 *   `dsh reindex` once; read commands never build one).
 * - `CLI_OUTPUT_INVALID`: `openapi --out FILE` names a path that cannot be
 *   written (a missing or unwritable directory, a directory) or an existing
 *   entry that is not a regular file (a symlink, FIFO, device or socket,
 *   which is never replaced). Nothing is left behind.
 * - `CLI_TRACE_UNDELIVERED`: `trace` could not deliver every span to the
 *   collector (it answered an error, was down, or did not answer in time).
 *   `details` carry `exported`, `dropped`, `sessions`, `traces` and
 *   `endpoint`; the root is unchanged: fix the collector and run it again.
 */
export type CliErrorCode =
  | 'CLI_USAGE'
  | 'CLI_UNKNOWN_COMMAND'
  | 'CLI_ROOT_INVALID'
  | 'CLI_TOKEN_INVALID'
  | 'CLI_STORE_NOT_EMPTY'
  | 'CLI_DEMO_FAILED'
  | 'CLI_SEARCH_UNAVAILABLE'
  | 'CLI_OUTPUT_INVALID'
  | 'CLI_TRACE_UNDELIVERED'

export class CliError extends DshError<CliErrorCode> {}

import { DshError } from '@dsh/context'
import { LINE_MAX_BYTES } from '@dsh/protocol/limits'

/**
 * Codes of `ImportV0Error`. The `IMPORT_V0_*` codes below `IMPORT_V0_CONFLICT`
 * describe one v0 log and end up as a session's `reason` in an import report:
 * they never stop a run. The rest are thrown by `importV0`/`exportV0`.
 */
export type ImportV0ErrorCode =
  /** A complete zstd frame that does not decode (a damaged block, a truncated middle frame). */
  | 'IMPORT_V0_DAMAGED_FRAME'
  /** A complete zstd frame whose content checksum does not match its plaintext. */
  | 'IMPORT_V0_CHECKSUM_MISMATCH'
  /** The bytes do not start with the zstd frame magic (not a v0 zstd log, or a skippable frame). */
  | 'IMPORT_V0_FOREIGN_MAGIC'
  /** A complete line that is not JSON, or not a JSON object. */
  | 'IMPORT_V0_BAD_JSON'
  /** Event seqs that do not run 0, 1, 2, … without a gap. */
  | 'IMPORT_V0_SEQ_GAP'
  /** A packed chunk row that does not have the row shape. */
  | 'IMPORT_V0_BAD_ROW'
  /** A line longer than `LINE_MAX_BYTES` (`@dsh/protocol/limits`): refused unread, never loaded whole. */
  | 'IMPORT_V0_LINE_TOO_LARGE'
  /** A zstd frame whose plaintext is over `V0_FRAME_MAX_BYTES`: refused from its stated size, where stream decoding passes the cap, or where its bytes run past what any frame within the cap takes. */
  | 'IMPORT_V0_FRAME_TOO_LARGE'
  /** The first line is not a v0 session header, or its fields are invalid. */
  | 'IMPORT_V0_BAD_HEADER'
  /** A header line with a version other than 0. */
  | 'IMPORT_V0_UNSUPPORTED_VERSION'
  /** The log sits where its header's id and cwd do not put it (the harness refuses it too). */
  | 'IMPORT_V0_MISPLACED'
  /** Two logs of the v0 root carry the same session id. */
  | 'IMPORT_V0_DUPLICATE_ID'
  /** The v0 log, or a directory or entry where the layout keeps one, cannot be read (permissions, I/O, a link or special file); or an export's write failed (`details: { path, code }`). */
  | 'IMPORT_V0_IO'
  /** The part of the session imported earlier no longer matches the v0 log (or the dsh session is another lifecycle). */
  | 'IMPORT_V0_CONFLICT'
  /** Reading or writing the dsh side failed (the persistence error, named in the message, is the cause). */
  | 'IMPORT_V0_PERSISTENCE_FAILED'
  /** The v0 root given to `importV0` is not a readable directory. */
  | 'IMPORT_V0_ROOT_INVALID'
  /** `exportV0` was asked for a session that is not persisted. */
  | 'IMPORT_V0_NOT_FOUND'
  /** `exportV0` would overwrite a log that already exists in the target v0 root. */
  | 'IMPORT_V0_EXPORT_EXISTS'
  /** An option out of range (`batchEvents`), no persistence for a run that writes, an export naming a session twice, or an export target that is not a directory, is under a file, or holds a symlink where a project or session directory goes. */
  | 'IMPORT_V0_INVALID_OPTION'
  /** An id or cwd that the v0 layout cannot name: empty, or an id whose session directory name would be over 255 bytes (`details.reason` `'too-long'`). */
  | 'IMPORT_V0_INVALID_ID'
  | 'CANCELLED'

export class ImportV0Error extends DshError<ImportV0ErrorCode> {}

/** The `CANCELLED` error an import or export rejects with after its signal aborted. */
export function importCancelled(): ImportV0Error {
  return new ImportV0Error('CANCELLED', 'The v0 import/export was cancelled by its caller (AbortSignal aborted).')
}

export function throwIfAborted(signal: AbortSignal | undefined): void {
  if (signal?.aborted === true) throw importCancelled()
}

/** Line `line` of a v0 log (1: the header) is longer than `LINE_MAX_BYTES`; `bytes` is its length, or how much of it was seen before the refusal. */
export function lineTooLarge(line: number, bytes: number): ImportV0Error {
  return new ImportV0Error(
    'IMPORT_V0_LINE_TOO_LARGE',
    `Line ${line} of the log is longer than ${LINE_MAX_BYTES} bytes (LINE_MAX_BYTES; ${bytes} seen): such a line is refused, never loaded whole. Trim the event in the harness, or leave the session out of the import.`,
    { details: { line, bytes, max: LINE_MAX_BYTES } },
  )
}

/** What a user can do about a file system error code, where there is something to say. */
const IO_REMEDIES: Readonly<Record<string, string>> = {
  EACCES: 'Give this user write permission there, or write elsewhere.',
  EPERM: 'Give this user write permission there, or write elsewhere.',
  EROFS: 'That file system is read-only: write elsewhere.',
  ENOSPC: 'The disk is full: free space and run it again.',
  EDQUOT: 'The disk quota is used up: free space and run it again.',
  EFBIG: 'A file passed the size limit (ulimit -f or the file system): raise it and run it again.',
  ENOTDIR: 'A part of that path is a file, not a directory.',
  ENAMETOOLONG: 'The path is longer than the file system allows: use a shorter directory.',
}

/**
 * A system error (one with an errno and a syscall, as `fs` throws) of `doing`
 * on `path`, as `IMPORT_V0_IO` naming the path and the system code
 * (`details: { path, code }`); any other error as it is (typed errors keep
 * their code).
 */
export function ioFailure(error: unknown, doing: string, path: string): unknown {
  if (error instanceof ImportV0Error || !(error instanceof Error) || !('syscall' in error) || !('code' in error)) return error
  const code = String(error.code)
  const remedy = IO_REMEDIES[code]
  return new ImportV0Error(
    'IMPORT_V0_IO',
    `Cannot ${doing} ${path} (${code}): ${error.message}.${remedy === undefined ? '' : ` ${remedy}`}`,
    {
      cause: error,
      details: { path, code },
    },
  )
}

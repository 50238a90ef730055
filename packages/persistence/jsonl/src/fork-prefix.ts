import { persistenceError, SessionPersistenceError } from '@dsh/session-persistence/backend'
import { labelOf } from './errors.js'
import type { ForkReference } from './log-format.js'

// What every read through a fork's reference to its source's prefix checks,
// and how it fails: the whole prefix (`LogReader.resolvePrefix`), a range of
// it (`sourceRange`) and the cheap check before a tail read
// (`LogReader.checkReference`). A prefix that cannot be read as referenced
// is `SESSION_PERSISTENCE_CORRUPT`, naming the fork's log, whatever went
// wrong in the source.

/** Fork chains longer than this are refused as corrupt (a cycle can only come from tampering). */
export const MAX_FORK_DEPTH = 64

/** Makes the error of a prefix read that failed, naming the fork's log. */
export type PrefixBroken = (why: string, cause?: unknown) => Error

export function prefixBroken(fork: ForkReference, childFile: string): PrefixBroken {
  return (why, cause) =>
    persistenceError(
      'SESSION_PERSISTENCE_CORRUPT',
      `Session log ${childFile} is a fork of ${labelOf(fork.source)} whose inherited prefix cannot be read as referenced: ${why}. Restore the source from a backup, or delete the fork explicitly.`,
      { cause, details: { file: childFile, source: fork.source } },
    )
}

/** The source's log file, for a read `depth` references below the fork being read. */
export function sourceLogFile(logPath: (id: string) => string, fork: ForkReference, depth: number, broken: PrefixBroken): string {
  if (depth > MAX_FORK_DEPTH) throw broken(`the fork chain is deeper than ${MAX_FORK_DEPTH}`)
  try {
    return logPath(fork.source)
  } catch (error) {
    throw broken('the source id is invalid', error)
  }
}

/** Whether a batch trailer is the one the reference names: its checksum, and event `cut - 1` inside it. */
export function isCutBatch(
  trailer: { readonly firstSeq: number; readonly count: number; readonly bodyCrc: number },
  fork: ForkReference,
): boolean {
  return trailer.bodyCrc === fork.batchCrc && trailer.firstSeq <= fork.cut - 1 && fork.cut - 1 < trailer.firstSeq + trailer.count
}

/**
 * The error a failed prefix read ends with: a cancellation, or an error
 * that names the fork's log already, as it is; anything else as `broken`.
 */
export function prefixFailure(error: unknown, childFile: string, broken: PrefixBroken): Error {
  if (
    error instanceof SessionPersistenceError &&
    (error.code === 'CANCELLED' || (error.details as { file?: string } | undefined)?.file === childFile)
  )
    return error
  return broken((error as Error).message, error)
}

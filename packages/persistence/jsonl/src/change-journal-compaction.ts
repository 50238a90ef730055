import {
  chmodSync,
  closeSync,
  constants,
  fchmodSync,
  fstatSync,
  openSync,
  readdirSync,
  readSync,
  renameSync,
  statSync,
  unlinkSync,
  writeSync,
} from 'node:fs'
import { basename, dirname, join } from 'node:path'
import { isErrno, isLiveTemp, randomHex, tempSibling } from './fs-io.js'
import { type HeldLock, liveLockHolder, lockPathOf, releaseLock, sleepSync, tryLock } from './journal-lock.js'
import {
  decodeJournalHeader,
  decodeLayout,
  encodeJournalHeader,
  encodeRecord,
  HEADER_BYTES,
  identityOf,
  isTorn,
  type JournalLayout,
  logicalOf,
  MAX_BASE_FRAME,
  type Pending,
  RECORD_MAGIC_BYTES,
  readFrame,
  readSummary,
  recordIdentity,
  type SummaryRecord,
} from './journal-records.js'
import { isAlive, ownIdentity } from './process-identity.js'

/**
 * Compaction of the change journal behind a horizon, so it stays bounded.
 *
 * When a writer finds more than `limit` bytes of verbatim records (1 MiB by
 * default), it compacts: under the journal's replacement lock
 * (`journal-lock.ts`) it reads the journal, **seals** it — clears the owner
 * write bit (mode 0400), then appends a seal record — reads on up to its
 * seal, and replaces the journal (temporary file, rename) by one of the same
 * lifecycle holding only a base record and a summary: per session changed in
 * the verbatim records, one record with the logical offset after its last
 * change, and the operations still in flight. The horizon moves to where
 * those verbatim records began (the previous base); the new base is the
 * seal's end. So the journal holds at most `limit` bytes of verbatim records
 * (plus the writes in flight when a compaction starts) and one summary record
 * per session changed between the horizon and the base.
 *
 * Nothing is lost, whichever process appends meanwhile: appenders check after
 * every write that the path still names the file they wrote to **and that it
 * is not sealed**. A write whose check saw it unsealed happened before the
 * seal, so before the compactor's read up to its seal record: it is in the
 * summary. A write whose check saw it sealed or replaced is written again to
 * the current journal by its writer, which first waits for the replacement
 * (milliseconds; a compactor does everything from the seal to the rename
 * synchronously) — or, when the sealing process died (its lock is stale),
 * completes the compaction itself. A compaction that fails after sealing
 * (no space for the new file) unseals the journal; followers paused at its
 * seal read on.
 *
 * Followers (`change-journal-reader.ts`): a cursor at or after the base
 * continues exactly; one between the horizon and the base is answered from
 * the summary (the sessions changed after it, and those in flight) without a
 * rescan; one before the horizon gets `rescan: true` with the reason
 * `behind-horizon` (the typed resync).
 */

/** Whether a journal file's mode says it is sealed (being compacted). */
export function isSealed(mode: number): boolean {
  return (mode & 0o200) === 0
}

/** How many 1 ms waits a writer makes for another process's compaction before it gives up (the append fails, nothing changed). */
const MAX_WAITS = 10_000
/** How many times a writer completes a dead process's compaction that keeps failing before it gives up. */
const MAX_RECOVERIES = 3

/**
 * Compacts the journal at `path` when it holds more than `limit` bytes of
 * verbatim records, or when it is sealed (completing a compaction whose
 * process died). Returns the inode of the file this call replaced;
 * `undefined` when another live process holds the lock or there is nothing
 * to do. Throws on an I/O failure, after unsealing.
 */
export function compactJournal(path: string, limit: number): number | undefined {
  const lock = tryLock(path)
  if (lock === undefined) return undefined
  try {
    return compactLocked(path, limit, lock)
  } finally {
    releaseLock(lock)
  }
}

/**
 * Waits while the journal at `path` (the file `ino`) is sealed, until it is
 * replaced or unsealed; completes the compaction when the process that sealed
 * it died. Throws when it stays sealed by a live process for about 10 s.
 */
export function awaitUnsealed(path: string, ino: number, limit: number): void {
  let waits = 0
  let recoveries = 0
  for (;;) {
    const stats = statSync(path, { throwIfNoEntry: false })
    if (stats === undefined || stats.ino !== ino || !isSealed(stats.mode)) return
    const holder = liveLockHolder(path)
    if (holder === undefined) {
      if (recoveries++ >= MAX_RECOVERIES) throw new Error(`the change journal ${path} stays sealed and cannot be compacted`)
      try {
        compactJournal(path, limit)
      } catch {
        // It unsealed the journal (or a later attempt gives up above).
      }
      continue
    }
    if (waits++ >= MAX_WAITS) {
      const gone = holder.host === ownIdentity().host ? '' : ` (if host ${holder.host} is gone, delete ${lockPathOf(path)})`
      throw new Error(
        `the change journal ${path} has been sealed for compaction by process ${holder.pid} on ${holder.host} for over 10 s${gone}`,
      )
    }
    sleepSync(1)
  }
}

/** What a compaction learns from the verbatim records. */
interface Fold {
  /** Per session: the logical offset after its last record. */
  readonly changed: Map<string, number>
  /** Operations begun and not ended (by op). */
  readonly inFlight: Map<string, Pending>
  /** Whether any record could not be read (the summary then vouches for nothing before the base). */
  damaged: boolean
}

function compactLocked(path: string, limit: number, lock: HeldLock): number | undefined {
  const fd = openForSeal(path)
  if (fd === undefined) return undefined
  let sealed = false
  let temp: string | undefined
  try {
    const stats = fstatSync(fd)
    const wasSealed = isSealed(stats.mode)
    const buf = readAtSync(fd, 0, stats.size)
    const lifecycle = decodeJournalHeader(buf)
    const layout = lifecycle === undefined ? undefined : decodeLayout(buf.subarray(0, HEADER_BYTES + MAX_BASE_FRAME))
    // A damaged header or base is the writers' to replace (a new lifecycle); nothing to compact.
    if (lifecycle === undefined || layout === undefined || layout.start > stats.size) return undefined
    if (!wasSealed && stats.size - layout.start <= limit) return undefined // compacted meanwhile
    const summary = readSummary(buf.subarray(layout.summaryStart, layout.start))
    const fold: Fold = {
      changed: new Map(),
      inFlight: new Map((summary?.inFlight ?? []).map((p) => [p.op, p])),
      damaged: summary === undefined,
    }
    // Most of the records are read before sealing, so appenders wait only for the rest.
    let at = foldRecords(buf, layout.start, layout, fold, undefined).end
    fchmodSync(fd, 0o400)
    sealed = true
    const seal = encodeRecord({ kind: 'x', id: '', op: lock.nonce, writer: recordIdentity() })
    writeAll(fd, seal)
    const rest = readAtSync(fd, at, fstatSync(fd).size - at)
    const tail = foldRecords(rest, 0, { ...layout, start: layout.start - at }, fold, lock.nonce)
    if (tail.seal === undefined) throw new Error('the seal record was not found (the journal was truncated or replaced)')
    at += tail.end
    const base = logicalOf(layout, at)
    const replacement = encodeCompacted(lifecycle, {
      horizon: fold.damaged ? base : layout.base,
      base,
      anchorLength: tail.seal.length,
      anchorCrc: tail.seal.crc,
      changed: fold.damaged ? [] : [...fold.changed].map(([id, end]) => ({ kind: 's' as const, id, at: end })),
      inFlight: [...fold.inFlight.values()].filter((p) => isAlive(identityOf(p.writer))),
    })
    temp = tempSibling(path)
    const out = openSync(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600)
    try {
      fchmodSync(out, 0o600)
      writeAll(out, replacement)
    } finally {
      closeSync(out)
    }
    // Under the lock nobody else replaces the journal; it must still be the file we sealed.
    if (statSync(path, { throwIfNoEntry: false })?.ino !== stats.ino) throw new Error('the change journal was replaced meanwhile')
    renameSync(temp, path)
    temp = undefined
    sealed = false // the sealed file is gone from the path: nothing to unseal
    removeStaleTemps(path)
    return stats.ino
  } catch (error) {
    if (sealed) fchmodSync(fd, 0o600)
    throw error
  } finally {
    closeSync(fd)
    if (temp !== undefined)
      try {
        unlinkSync(temp)
      } catch {}
  }
}

/** Removes what compactions and lock takers killed meanwhile left beside the journal (`.changes.journal[.lock].tmp-…` of processes that exited). */
function removeStaleTemps(path: string): void {
  const dir = dirname(path)
  const prefix = `.${basename(path)}.`
  let names: string[]
  try {
    names = readdirSync(dir)
  } catch {
    return
  }
  for (const name of names) {
    if (!name.startsWith(prefix) || !name.includes('.tmp-') || isLiveTemp(name)) continue
    try {
      unlinkSync(join(dir, name))
    } catch {}
  }
}

/** Opens the journal for appending its seal; a sealed one (a compaction that died) is made writable for the moment it takes to seal it anew. */
function openForSeal(path: string): number | undefined {
  const flags = constants.O_RDWR | constants.O_APPEND | constants.O_NOFOLLOW
  try {
    return openSync(path, flags)
  } catch (error) {
    if (isErrno(error, 'ENOENT')) return undefined
    if (!isErrno(error, 'EACCES')) throw error
  }
  chmodSync(path, 0o600)
  return openSync(path, flags)
}

/**
 * Folds the verbatim records of `buf` from `from` into `fold`: up to the last
 * complete record, or to the seal `nonce` names (included; other seals are
 * left behind by compactions that died or failed). Damaged bytes (a torn
 * frame among them) are skipped to the next record that checks out, and mark
 * the fold damaged.
 */
function foldRecords(
  buf: Buffer,
  from: number,
  layout: JournalLayout,
  fold: Fold,
  nonce: string | undefined,
): { end: number; seal?: { length: number; crc: number } } {
  let at = from
  for (;;) {
    const read = readFrame(buf, at)
    if (read.status === 'incomplete' && !isTorn(buf, at)) return { end: at }
    if (read.status !== 'record' || (read.record.kind !== 'b' && read.record.kind !== 'e' && read.record.kind !== 'x')) {
      fold.damaged = true
      const next = buf.indexOf(RECORD_MAGIC_BYTES, at + 1)
      if (next === -1) return { end: at }
      at = next
      continue
    }
    const { record } = read
    if (record.kind === 'x') {
      if (record.op === nonce) return { end: read.end, seal: { length: read.end - at, crc: read.crc } }
    } else {
      fold.changed.set(record.id, logicalOf(layout, read.end))
      if (record.kind === 'b') fold.inFlight.set(record.op, { op: record.op, id: record.id, writer: record.writer })
      else fold.inFlight.delete(record.op)
    }
    at = read.end
  }
}

/** A compacted journal's bytes: header, base record, summary (sessions by offset, then the operations in flight). */
function encodeCompacted(
  lifecycle: string,
  parts: {
    horizon: number
    base: number
    anchorLength: number
    anchorCrc: number
    changed: SummaryRecord[]
    inFlight: Pending[]
  },
): Buffer {
  const summary = [
    ...parts.changed.sort((a, b) => a.at - b.at).map((s) => encodeRecord(s)),
    ...parts.inFlight.map((p) => encodeRecord({ kind: 'o', id: p.id, op: p.op, writer: p.writer })),
  ]
  const summaryBytes = summary.reduce((n, b) => n + b.length, 0)
  const { horizon, base, anchorLength, anchorCrc } = parts
  const head = encodeRecord({ kind: 'h', horizon, base, anchorLength, anchorCrc, summaryBytes })
  return Buffer.concat([encodeJournalHeader(lifecycle, true), head, ...summary])
}

/** Publishes a new, empty journal with a fresh lifecycle where there is none (`replacing` undefined) or over the damaged file `replacing` (an inode). */
export function publishJournal(path: string, replacing: number | undefined): void {
  const lock = waitForLock(path)
  try {
    const current = statSync(path, { throwIfNoEntry: false })
    // Someone else published (or replaced) it while we waited.
    if (replacing === undefined ? current !== undefined : current?.ino !== replacing) return
    const temp = tempSibling(path)
    const fd = openSync(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600)
    try {
      fchmodSync(fd, 0o600)
      writeAll(fd, encodeJournalHeader(randomHex(16)))
    } finally {
      closeSync(fd)
    }
    try {
      renameSync(temp, path)
    } finally {
      try {
        unlinkSync(temp)
      } catch {}
    }
  } finally {
    releaseLock(lock)
  }
}

function waitForLock(path: string): HeldLock {
  for (let waits = 0; waits < MAX_WAITS; waits++) {
    const lock = tryLock(path)
    if (lock !== undefined) return lock
    sleepSync(1)
  }
  throw new Error(`the change journal's lock ${path}.lock stays held`)
}

export function writeAll(fd: number, data: Buffer): void {
  let done = 0
  while (done < data.length) done += writeSync(fd, data, done, data.length - done)
}

/** Reads `length` bytes at `position` (fewer only at the end of the file). */
export function readAtSync(fd: number, position: number, length: number): Buffer {
  const out = Buffer.allocUnsafe(Math.max(0, length))
  let done = 0
  while (done < length) {
    const n = readSync(fd, out, done, length - done, position + done)
    if (n === 0) break
    done += n
  }
  return out.subarray(0, done)
}

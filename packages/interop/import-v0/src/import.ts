import { promises as fsp } from 'node:fs'
import { resolve } from 'node:path'
import { setImmediate as yieldToEventLoop } from 'node:timers/promises'
import type { SessionHeader, SessionLogOffset, StoredSessionEvent } from '@dsh/session'
import {
  type AppendedEvent,
  eventCount,
  expandEventRuns,
  isEventRun,
  type SessionObservation,
  type SessionPersistence,
  type StoredEventRun,
} from '@dsh/session-persistence'
import { DSH_EVENTS, toDshHeader } from './convert.js'
import { ImportV0Error, type ImportV0ErrorCode, importCancelled, throwIfAborted } from './errors.js'
import { readV0Header } from './header-read.js'
import { Batcher, type ImportTarget, isCancel, type Kept, NOTHING_KEPT, type RunContext, SessionFailure } from './import-batches.js'
import { scanV0Root, type V0LogEntry } from './listing.js'
import { openV0Log, type V0EventReader } from './reader.js'
import type { V0Header } from './v0-types.js'

/**
 * `importV0`: every session of a v0 root into a dsh persistence.
 *
 * Invariants, in the order they are enforced:
 * - The v0 root is only read (no file is created, locked or changed in it).
 * - Per-session faults never stop the run: a session that cannot be read,
 *   mapped or written is reported with a typed reason and the next one runs.
 * - Incremental and idempotent: what an earlier run imported is compared,
 *   event by event, with what the v0 log says now — equal → nothing written;
 *   a longer v0 log → only the new events appended; anything else (an event
 *   changed, the log shrank, another lifecycle under the id) → a conflict,
 *   and the dsh session is left exactly as it was.
 * - Lineage is kept: ids, parentSession, origin, depth, agentPreset and the
 *   exact cut (`seedLength` → `inheritedEventCount`). Parents are imported
 *   before their forks; a fork whose inherited prefix equals its imported
 *   source is appended with `forkSource` (a backend may store a reference).
 */

export interface ImportV0Options {
  /** The v0 root (the directory holding `--<project>--/` and `_no-cwd/`). */
  readonly from: string
  /** Where the sessions go. Optional only with `dryRun` (then every session counts as new). */
  readonly persistence?: SessionPersistence
  /** Read, map and compare everything, write nothing. */
  readonly dryRun?: boolean
  /** Called after each session (and once with `done: 0` before the first). */
  readonly onProgress?: (progress: ImportProgress) => void
  readonly signal?: AbortSignal
  /**
   * An append batch holds at most this many events (default 65536) and about
   * `batchBytes` of source text (default 512 KiB); a fork's first batch
   * holds at least its whole inherited prefix. Larger batches mean fewer
   * fsyncs (they overlap with reading the next batch); smaller ones keep
   * fewer objects alive across young-generation GCs (the batch being filled
   * and the one being written), which costs more CPU than the extra fsyncs
   * (100 MiB session, medians of 6 interleaved runs: GC 0.39 s, main thread
   * 3.12 s, process 3.91 s at 512 KiB; 0.56 / 3.14 / 4.05 s at 1 MiB;
   * 0.66 / 3.29 / 4.31 s at 2 MiB; 256 KiB no better than 512 KiB).
   */
  readonly batchEvents?: number
  readonly batchBytes?: number
}

export interface ImportProgress {
  readonly done: number
  readonly total: number
  readonly id?: string
}

export type SessionImportStatus = 'imported' | 'updated' | 'unchanged' | 'failed'

export interface SessionImportResult {
  /** The session id (absent when even the header could not be read). */
  readonly id?: string
  /** The v0 log file; for an entry found unreadable while listing the root (a project or session directory, a link or special file where a log belongs), that entry. */
  readonly path: string
  readonly status: SessionImportStatus
  /** Events the v0 log holds (committed, rows expanded). */
  readonly events: number
  /**
   * Events appended by this run (would be, with `dryRun`). For a failed
   * session, the events of its appends that were committed and kept (a
   * failed write keeps them, and the next run continues from them); 0 when
   * nothing was written or this run took the session back.
   */
  readonly appended: number
  /** The imported source this fork was appended as a reference to. */
  readonly forkSource?: string
  /**
   * How much of a torn tail was skipped (its complete records are imported):
   * a plain log's bytes after its last newline; for a torn final zstd frame,
   * the bytes of text its header says it holds beyond the complete lines
   * imported (its bytes in the log when it states no size). Absent when
   * nothing was skipped — a frame cut only in its trailing checksum.
   */
  readonly tornBytes?: number
  /** Why the session failed (`status: 'failed'`). */
  readonly reason?: { readonly code: ImportV0ErrorCode; readonly message: string }
}

export interface ImportV0Report {
  readonly from: string
  readonly dryRun: boolean
  readonly imported: number
  readonly updated: number
  readonly unchanged: number
  readonly failed: number
  /** Append batches this run committed, those a failed session kept included (0 with `dryRun`). */
  readonly appends: number
  readonly sessions: readonly SessionImportResult[]
}

const DEFAULT_BATCH = 65536
const DEFAULT_BATCH_BYTES = 512 * 1024
/**
 * Reading yields to the event loop every this many events (a power of two).
 * Otherwise it would yield only when a batch is full, and the append in
 * flight could not go on meanwhile (its compression, write and sync finish
 * in I/O callbacks), nor a cancel be seen. 100 MiB session, four sets of
 * 5-6 interleaved runs: wall medians 0.1-0.5 s lower, GC 0.04-0.16 s lower
 * (the batch being written is dropped sooner); ~600 yields of ~20 µs.
 */
export const YIELD_EVERY = 2048

/** What a dry run without a persistence compares against: nothing is stored. */
const EMPTY: Pick<SessionPersistence, 'stat' | 'inspect' | 'append' | 'delete'> = {
  stat: async () => undefined,
  inspect: async (id) => {
    throw new ImportV0Error('IMPORT_V0_NOT_FOUND', `Session ${JSON.stringify(id)} is not stored.`)
  },
  append: async () => {
    throw new ImportV0Error('IMPORT_V0_INVALID_OPTION', 'A dry run writes nothing.')
  },
  delete: async () => false,
}

interface Candidate {
  readonly entry: V0LogEntry
  readonly header: V0Header
}

export async function importV0(options: ImportV0Options): Promise<ImportV0Report> {
  const from = resolve(options.from)
  const { signal } = options
  const dryRun = options.dryRun === true
  const batchEvents = options.batchEvents ?? DEFAULT_BATCH
  const batchBytes = options.batchBytes ?? DEFAULT_BATCH_BYTES
  for (const [name, value] of [
    ['batchEvents', batchEvents],
    ['batchBytes', batchBytes],
  ] as const) {
    if (!Number.isSafeInteger(value) || value < 1)
      throw new ImportV0Error('IMPORT_V0_INVALID_OPTION', `${name} must be a positive integer, got ${String(value)}.`)
  }
  if (options.persistence === undefined && !dryRun) {
    throw new ImportV0Error('IMPORT_V0_INVALID_OPTION', 'importV0 needs a persistence to write into (only a dry run may go without one).')
  }
  const persistence = options.persistence ?? EMPTY
  const stat = await fsp.stat(from).catch(() => undefined)
  if (stat?.isDirectory() !== true) {
    throw new ImportV0Error(
      'IMPORT_V0_ROOT_INVALID',
      `${from} is not a directory: pass the v0 session root (the directory holding '--<project>--' and '_no-cwd').`,
    )
  }
  throwIfAborted(signal)
  const { logs: entries, faults } = await scanV0Root(from)
  const results: SessionImportResult[] = []
  let appends = 0
  const fail = (entry: { readonly path: string }, error: unknown, id?: string): void => {
    if (isCancel(error, signal)) throw importCancelled()
    const reason = error instanceof ImportV0Error ? { code: error.code, message: error.message } : persistenceReason(error)
    // What the session's committed appends left stored counts as written by this run: the next run continues from it.
    const { events, kept } = error instanceof SessionFailure ? error : { events: 0, kept: NOTHING_KEPT }
    appends += kept.appends
    results.push({ ...(id === undefined ? {} : { id }), path: entry.path, status: 'failed', events, appended: kept.appended, reason })
  }

  // Entries where a session's directory or log belongs that cannot be read as one: reported, never skipped silently.
  for (const fault of faults) fail(fault, fault.error, fault.dirId)

  // Phase 1: headers only, to order parents before their forks and to catch duplicates and misplaced logs.
  const candidates: Candidate[] = []
  for (const entry of entries) {
    throwIfAborted(signal)
    try {
      candidates.push({ entry, header: await readV0Header(from, entry) })
    } catch (error) {
      fail(entry, error, entry.dirId)
    }
  }
  const byId = new Map<string, Candidate[]>()
  for (const candidate of candidates) byId.set(candidate.header.id, [...(byId.get(candidate.header.id) ?? []), candidate])
  const unique: Candidate[] = []
  for (const [id, group] of byId) {
    if (group.length === 1) {
      unique.push(group[0] as Candidate)
      continue
    }
    for (const candidate of group) {
      fail(
        candidate.entry,
        new ImportV0Error(
          'IMPORT_V0_DUPLICATE_ID',
          `Session ${JSON.stringify(id)} has ${group.length} logs in the v0 root (${group.map((c) => c.entry.path).join(', ')}); the harness refuses such a root too.`,
        ),
        id,
      )
    }
  }
  const ordered = parentsFirst(unique)
  const total = results.length + ordered.length
  options.onProgress?.({ done: results.length, total })

  for (const candidate of ordered) {
    throwIfAborted(signal)
    const id = candidate.header.id
    try {
      const outcome = await importOne(candidate, { from, persistence, dryRun, batchEvents, batchBytes, signal })
      appends += outcome.appends
      results.push(outcome.result)
    } catch (error) {
      fail(candidate.entry, error, id)
    }
    options.onProgress?.({ done: results.length, total, id })
  }
  const count = (status: SessionImportStatus): number => results.filter((r) => r.status === status).length
  return {
    from,
    dryRun,
    imported: count('imported'),
    updated: count('updated'),
    unchanged: count('unchanged'),
    failed: count('failed'),
    appends,
    sessions: results,
  }
}

/** A failure of the dsh side that was not wrapped where it happened. */
function persistenceReason(error: unknown): { code: ImportV0ErrorCode; message: string } {
  const code = error instanceof Error && 'code' in error ? String(error.code) : 'UNKNOWN'
  const message = error instanceof Error ? error.message : String(error)
  return { code: 'IMPORT_V0_PERSISTENCE_FAILED', message: `The dsh persistence failed (${code}): ${message}` }
}

/** Orders sessions so that every parent present in the set comes before its children (cycle-safe; ties by path). */
function parentsFirst(candidates: readonly Candidate[]): Candidate[] {
  const byId = new Map(candidates.map((c) => [c.header.id, c]))
  const depth = new Map<string, number>()
  // A loop, not recursion: a hostile root may chain any number of sessions.
  for (const start of candidates) {
    const chain: Candidate[] = []
    const seen = new Set<string>()
    let base = 0
    for (let at: Candidate | undefined = start; at !== undefined; ) {
      const known = depth.get(at.header.id)
      if (known !== undefined) {
        base = known + 1
        break
      }
      chain.push(at)
      seen.add(at.header.id)
      const parent: Candidate | undefined = at.header.parentSession === undefined ? undefined : byId.get(at.header.parentSession)
      at = parent === undefined || seen.has(parent.header.id) ? undefined : parent
    }
    for (let i = chain.length - 1; i >= 0; i--) depth.set((chain[i] as Candidate).header.id, base++)
  }
  return [...candidates].sort(
    (a, b) => (depth.get(a.header.id) ?? 0) - (depth.get(b.header.id) ?? 0) || (a.entry.path < b.entry.path ? -1 : 1),
  )
}

/**
 * One session, streamed: events are read, converted, compared and appended a
 * batch at a time, so the whole session is never in memory (only the stored
 * events an earlier run imported, a fork source's prefix, and an update's
 * suffix until the log has been read to its end).
 *
 * - New session: batches are appended as they fill (a fork's first batch
 *   holds its whole inherited prefix, compared with the parent's to choose
 *   `forkSource`). A line fault found after the first append deletes the
 *   session again: a failed session is not left half imported.
 * - Stored session: the stored prefix is compared event by event as it is
 *   read; the suffix is appended only once the log has been read cleanly to
 *   its end, so a conflict or a fault leaves the dsh session as it was.
 * - A failed write (either kind of session) keeps the batches committed
 *   before it; the failure carries them (`kept`), as the report counts them.
 */
async function importOne(candidate: Candidate, run: RunContext): Promise<{ result: SessionImportResult; appends: number }> {
  const log = await openV0Log(run.from, candidate.entry, DSH_EVENTS)
  try {
    return await importFrom(log, run)
  } finally {
    // A session that stops before the end of its log (a conflict, a failed write, a cancel) lets go of its file too.
    await log.close()
  }
}

async function importFrom(log: V0EventReader<AppendedEvent>, run: RunContext): Promise<{ result: SessionImportResult; appends: number }> {
  const { persistence, signal } = run
  const { header, inheritedEventCount } = toDshHeader(log.header)
  const id = header.id
  const revision = await persistence.stat(id, signal)
  const stored = revision === undefined ? undefined : await persistence.inspect(id, signal)
  const headerProblem = stored === undefined ? undefined : compareHeaders(header, inheritedEventCount, stored)
  if (headerProblem !== undefined) throw new SessionFailure(0, 'IMPORT_V0_CONFLICT', headerProblem)
  const source = stored === undefined ? await forkSourceCandidate(header, inheritedEventCount, persistence, signal) : undefined
  let sourceMatches = source !== undefined

  const target: { header: SessionHeader; inheritedEventCount: SessionLogOffset; forkSource?: SessionHeader['id'] } = {
    header,
    inheritedEventCount,
  }
  const batcher = new Batcher(run, target, stored === undefined ? inheritedEventCount : 0)
  const storedCount = stored?.events.length ?? 0
  let count = 0
  try {
    // Frames decode on the thread pool ahead of the reader: `next()` returns what is decoded, `more()` waits for the rest.
    do {
      for (let item = log.next(); item !== undefined; item = log.next()) {
        // A run wholly inside the stored prefix is compared column by column, none of its events made.
        if (isEventRun(item) && count + eventCount(item) <= storedCount) {
          const same = matchingRunPrefix((stored as SessionObservation).events, count, item)
          count += same
          if (same < eventCount(item)) {
            throw new SessionFailure(
              count,
              'IMPORT_V0_CONFLICT',
              `Event ${count} was imported earlier with other content than the v0 log holds now: the already-imported prefix changed.`,
            )
          }
          continue
        }
        // Elsewhere the stored prefix and the inherited seed are compared event by event: a run there is taken as its events.
        const pieces = isEventRun(item) && (count < storedCount || count < inheritedEventCount) ? expandEventRuns(id, [item]) : [item]
        const textLength = log.textLength / pieces.length
        for (const event of pieces) {
          if (count < storedCount) {
            if (isEventRun(event) || !sameEvent((stored as SessionObservation).events[count] as StoredSessionEvent, event)) {
              throw new SessionFailure(
                count,
                'IMPORT_V0_CONFLICT',
                `Event ${count} was imported earlier with other content than the v0 log holds now: the already-imported prefix changed.`,
              )
            }
            count += 1
            continue
          }
          if (source !== undefined && count < inheritedEventCount && sourceMatches) {
            sourceMatches = count < source.length && !isEventRun(event) && sameEvent(source[count] as StoredSessionEvent, event)
          }
          if (count === inheritedEventCount && source !== undefined && sourceMatches && batcher.started === 0) {
            target.forkSource = header.parentSession as SessionHeader['id']
          }
          const size = eventCount(event)
          const before = count
          count += size
          // An update holds its suffix until the log has been read to its end; a new session appends as batches fill.
          const appending = batcher.add(event, size, textLength, stored === undefined)
          if (appending !== undefined) await appending
          else if (Math.floor(before / YIELD_EVERY) !== Math.floor(count / YIELD_EVERY)) await yieldToEventLoop()
          throwIfAborted(signal)
        }
      }
    } while (await log.more())
    if (count < inheritedEventCount) {
      throw new SessionFailure(
        count,
        'IMPORT_V0_BAD_HEADER',
        `The header says ${inheritedEventCount} events were inherited, but the log holds only ${count}.`,
      )
    }
    if (count < storedCount) {
      throw new SessionFailure(
        count,
        'IMPORT_V0_CONFLICT',
        `${storedCount} events were imported earlier, but the v0 log now holds only ${count}: it was rewritten, not appended to.`,
      )
    }
    if (source !== undefined && sourceMatches && inheritedEventCount === count && batcher.started === 0) {
      target.forkSource = header.parentSession as SessionHeader['id']
    }
    // An update's held suffix, a new session's last batch: a failed write here is reported as one while reading is.
    if (stored === undefined || count !== storedCount) await batcher.finish()
  } catch (error) {
    // No append of this session outlives its import: each one was committed or refused when this returns.
    await batcher.settle().catch(() => {})
    let kept: Kept = { appends: batcher.appends, appended: batcher.appendedEvents }
    // A session this run created whose log turned out bad after its first append is taken back:
    // a failed session is not left half imported. (A failed write or a cancel keeps what was written: the next run continues it.)
    const readFault = error instanceof ImportV0Error && error.code !== 'IMPORT_V0_PERSISTENCE_FAILED' && error.code !== 'CANCELLED'
    if (readFault && stored === undefined && batcher.started > 0) {
      try {
        await persistence.delete(id)
      } catch (cause) {
        throw new SessionFailure(
          count,
          error.code,
          `${error.message} The ${batcher.started} batches imported before it could not be removed (${(cause as Error).message}): delete the dsh session ${JSON.stringify(id)} before importing it again.`,
          error,
          kept,
        )
      }
      kept = NOTHING_KEPT
    }
    // A cancel stops the run (nothing is reported).
    if (error instanceof Error && 'code' in error && error.code === 'CANCELLED') throw error
    // Any failure is reported with the events read when it happened (before a faulty line; an update's stored prefix
    // included) and with what the session's committed appends left stored.
    if (error instanceof SessionFailure) throw new SessionFailure(count, error.code, error.message, error.cause, kept)
    const reason = error instanceof ImportV0Error ? { code: error.code, message: error.message } : persistenceReason(error)
    throw new SessionFailure(error instanceof ImportV0Error ? count : 0, reason.code, reason.message, error, kept)
  }
  const base = { id, path: log.path, events: count, ...(log.skippedBytes > 0 ? { tornBytes: log.skippedBytes } : {}) }
  if (stored !== undefined && count === storedCount) return { result: { ...base, status: 'unchanged', appended: 0 }, appends: 0 }
  const forkSource = target.forkSource
  return {
    result: {
      ...base,
      status: stored === undefined ? 'imported' : 'updated',
      appended: count - storedCount,
      ...(forkSource === undefined ? {} : { forkSource }),
    },
    appends: batcher.appends,
  }
}

/** Why the stored (earlier imported) session is another lifecycle or cut than the v0 header says, or `undefined`. */
function compareHeaders(
  header: SessionHeader,
  inheritedEventCount: SessionLogOffset,
  stored: { header: SessionHeader; inheritedEventCount: SessionLogOffset },
): string | undefined {
  const differing = (Object.keys(header) as (keyof SessionHeader)[])
    .concat(Object.keys(stored.header) as (keyof SessionHeader)[])
    .find((field) => header[field] !== stored.header[field])
  if (differing !== undefined) {
    return `The dsh session ${JSON.stringify(header.id)} has another ${differing} than the v0 header (${JSON.stringify(stored.header[differing])} vs ${JSON.stringify(header[differing])}): another lifecycle under the same id; delete it explicitly to re-import.`
  }
  if (stored.inheritedEventCount !== inheritedEventCount) {
    return `The dsh session inherits ${stored.inheritedEventCount} events, the v0 header says ${inheritedEventCount}.`
  }
  return undefined
}

/**
 * How many of the events `item` stands for equal `events[at]`, `events[at + 1]`, …
 * in order (as `sameEvent` would find them): its columns are compared with
 * each event's data as they are, none of its events made.
 */
function matchingRunPrefix(events: readonly StoredSessionEvent[], at: number, item: StoredEventRun): number {
  const { type, run } = item
  const keys = Object.keys(run.data)
  let time = item.time
  for (let k = 0; k <= run.dt.length; k++) {
    if (k > 0) time += run.dt[k - 1] as number
    const event = events[at + k]
    if (event === undefined || event.type !== type || event.seq !== item.seq + k || event.time !== time) return k
    const data = event.data
    if (typeof data !== 'object' || data === null || Array.isArray(data)) return k
    let c = 0
    for (const key in data) {
      const column = run.data[key]
      if (key !== keys[c] || (data as Record<string, unknown>)[key] !== (Array.isArray(column) ? column[k] : column)) return k
      c++
    }
    if (c !== keys.length) return k
  }
  return eventCount(item)
}

function sameEvent(a: StoredSessionEvent, b: StoredSessionEvent): boolean {
  return a.type === b.type && a.seq === b.seq && a.time === b.time && JSON.stringify(a.data) === JSON.stringify(b.data)
}

/** The imported parent's events, when this seeded session may be appended as a reference to it (its prefix is compared as it is read). */
async function forkSourceCandidate(
  header: SessionHeader,
  inheritedEventCount: number,
  persistence: ImportTarget,
  signal: AbortSignal | undefined,
): Promise<readonly StoredSessionEvent[] | undefined> {
  const parent = header.parentSession
  if (!header.isSeeded || parent === undefined || inheritedEventCount === 0) return undefined
  if ((await persistence.stat(parent, signal)) === undefined) return undefined
  const source = await persistence.inspect(parent, signal)
  return source.events.length < inheritedEventCount ? undefined : source.events
}

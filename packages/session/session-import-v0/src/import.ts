import { promises as fsp } from 'node:fs'
import { resolve } from 'node:path'
import type { SessionHeader, SessionLogOffset, StoredSessionEvent } from '@dsh/session'
import type { AppendTarget, SessionPersistence } from '@dsh/session-persistence'
import { toDshEvent, toDshHeader } from './convert.js'
import { ImportV0Error, type ImportV0ErrorCode, importCancelled, throwIfAborted } from './errors.js'
import { readV0Header } from './header-read.js'
import { listV0Logs, readV0Log, type V0LogEntry } from './reader.js'
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
   * `batchBytes` of source text (default 8 MiB); a fork's first batch holds
   * at least its whole inherited prefix. Fewer, larger batches mean fewer
   * fsyncs; the byte bound keeps one batch's serialised text small.
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
  /** The v0 log file. */
  readonly path: string
  readonly status: SessionImportStatus
  /** Events the v0 log holds (committed, rows expanded). */
  readonly events: number
  /** Events appended by this run (would be, with `dryRun`). */
  readonly appended: number
  /** The imported source this fork was appended as a reference to. */
  readonly forkSource?: string
  /** Bytes of a torn final frame whose complete records were imported. */
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
  /** Append batches this run made (0 with `dryRun`). */
  readonly appends: number
  readonly sessions: readonly SessionImportResult[]
}

const DEFAULT_BATCH = 65536
const DEFAULT_BATCH_BYTES = 8 * 1024 * 1024

/** What a dry run without a persistence compares against: nothing is stored. */
const EMPTY: Pick<SessionPersistence, 'stat' | 'inspect' | 'append'> = {
  stat: async () => undefined,
  inspect: async (id) => {
    throw new ImportV0Error('IMPORT_V0_NOT_FOUND', `Session ${JSON.stringify(id)} is not stored.`)
  },
  append: async () => {
    throw new ImportV0Error('IMPORT_V0_INVALID_OPTION', 'A dry run writes nothing.')
  },
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
  const entries = await listV0Logs(from)
  const results: SessionImportResult[] = []
  const fail = (entry: V0LogEntry, error: unknown, id?: string, events = 0): void => {
    if (isCancel(error, signal)) throw importCancelled()
    const reason = error instanceof ImportV0Error ? { code: error.code, message: error.message } : persistenceReason(error)
    results.push({ ...(id === undefined ? {} : { id }), path: entry.path, status: 'failed', events, appended: 0, reason })
  }

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

  let appends = 0
  for (const candidate of ordered) {
    throwIfAborted(signal)
    const id = candidate.header.id
    try {
      const outcome = await importOne(candidate, { from, persistence, dryRun, batchEvents, batchBytes, signal })
      appends += outcome.appends
      results.push(outcome.result)
    } catch (error) {
      fail(candidate.entry, error, id, error instanceof SessionFailure ? error.events : 0)
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

function isCancel(error: unknown, signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true || (error instanceof Error && 'code' in error && error.code === 'CANCELLED')
}

/** Orders sessions so that every parent present in the set comes before its children (cycle-safe; ties by path). */
function parentsFirst(candidates: readonly Candidate[]): Candidate[] {
  const byId = new Map(candidates.map((c) => [c.header.id, c]))
  const depth = new Map<string, number>()
  const depthOf = (candidate: Candidate, seen: Set<string>): number => {
    const known = depth.get(candidate.header.id)
    if (known !== undefined) return known
    const parent = candidate.header.parentSession === undefined ? undefined : byId.get(candidate.header.parentSession)
    seen.add(candidate.header.id)
    const value = parent === undefined || seen.has(parent.header.id) ? 0 : depthOf(parent, seen) + 1
    depth.set(candidate.header.id, value)
    return value
  }
  for (const candidate of candidates) depthOf(candidate, new Set())
  return [...candidates].sort(
    (a, b) => (depth.get(a.header.id) ?? 0) - (depth.get(b.header.id) ?? 0) || (a.entry.path < b.entry.path ? -1 : 1),
  )
}

/** A per-session failure that knows how many events the v0 log held. */
class SessionFailure extends ImportV0Error {
  constructor(
    readonly events: number,
    code: ImportV0ErrorCode,
    message: string,
    cause?: unknown,
  ) {
    super(code, message, cause === undefined ? undefined : { cause })
  }
}

/** The part of the persistence contract an import uses. */
type ImportTarget = Pick<SessionPersistence, 'stat' | 'inspect' | 'append'>

interface RunContext {
  readonly from: string
  readonly persistence: ImportTarget
  readonly dryRun: boolean
  readonly batchEvents: number
  readonly batchBytes: number
  readonly signal: AbortSignal | undefined
}

async function importOne(candidate: Candidate, run: RunContext): Promise<{ result: SessionImportResult; appends: number }> {
  const { persistence, signal } = run
  const log = await readV0Log(run.from, candidate.entry)
  const { header, inheritedEventCount } = toDshHeader(log.header)
  const events = log.events.map(toDshEvent)
  // The v0 objects are no longer needed (converted events share what they keep): let them go before the appends.
  log.events.length = 0
  const base = { id: header.id, path: log.path, events: events.length, ...(log.tornBytes > 0 ? { tornBytes: log.tornBytes } : {}) }
  if (inheritedEventCount > events.length) {
    throw new SessionFailure(
      events.length,
      'IMPORT_V0_BAD_HEADER',
      `The header says ${inheritedEventCount} events were inherited, but the log holds only ${events.length}.`,
    )
  }

  const revision = await persistence.stat(header.id, signal)
  if (revision !== undefined) {
    const stored = await persistence.inspect(header.id, signal)
    const problem = compareStored(header, inheritedEventCount, events, stored)
    if (problem !== undefined) throw new SessionFailure(events.length, 'IMPORT_V0_CONFLICT', problem)
    if (stored.events.length === events.length) return { result: { ...base, status: 'unchanged', appended: 0 }, appends: 0 }
    const suffix = events.slice(stored.events.length)
    const appends = run.dryRun
      ? 0
      : await appendAll(run, { header, inheritedEventCount }, suffix, log.textLengths.slice(stored.events.length), 0)
    return { result: { ...base, status: 'updated', appended: suffix.length }, appends }
  }

  const forkSource = await matchingForkSource(header, inheritedEventCount, events, persistence, signal)
  const target: AppendTarget = {
    header,
    inheritedEventCount,
    ...(forkSource === undefined ? {} : { forkSource: forkSource as SessionHeader['id'] }),
  }
  const appends = run.dryRun ? 0 : await appendAll(run, target, events, log.textLengths, inheritedEventCount)
  return {
    result: { ...base, status: 'imported', appended: events.length, ...(forkSource === undefined ? {} : { forkSource }) },
    appends,
  }
}

/** Why the stored (earlier imported) session does not continue into `events`, or `undefined` when it does. */
function compareStored(
  header: SessionHeader,
  inheritedEventCount: SessionLogOffset,
  events: readonly StoredSessionEvent[],
  stored: { header: SessionHeader; inheritedEventCount: SessionLogOffset; events: readonly StoredSessionEvent[] },
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
  if (stored.events.length > events.length) {
    return `${stored.events.length} events were imported earlier, but the v0 log now holds only ${events.length}: it was rewritten, not appended to.`
  }
  const at = firstDifference(stored.events, events, stored.events.length)
  if (at !== undefined)
    return `Event ${at} was imported earlier with other content than the v0 log holds now: the already-imported prefix changed.`
  return undefined
}

function sameEvent(a: StoredSessionEvent, b: StoredSessionEvent): boolean {
  return a.type === b.type && a.seq === b.seq && a.time === b.time && JSON.stringify(a.data) === JSON.stringify(b.data)
}

/** The first seq below `count` where `a` and `b` differ. */
function firstDifference(a: readonly StoredSessionEvent[], b: readonly StoredSessionEvent[], count: number): number | undefined {
  for (let i = 0; i < count; i++) if (!sameEvent(a[i] as StoredSessionEvent, b[i] as StoredSessionEvent)) return i
  return undefined
}

/** The parent to reference when this seeded session's inherited prefix equals the parent's imported prefix. */
async function matchingForkSource(
  header: SessionHeader,
  inheritedEventCount: number,
  events: readonly StoredSessionEvent[],
  persistence: ImportTarget,
  signal: AbortSignal | undefined,
): Promise<string | undefined> {
  const parent = header.parentSession
  if (!header.isSeeded || parent === undefined || inheritedEventCount === 0) return undefined
  if ((await persistence.stat(parent, signal)) === undefined) return undefined
  const source = await persistence.inspect(parent, signal)
  if (source.events.length < inheritedEventCount) return undefined
  return firstDifference(source.events, events, inheritedEventCount) === undefined ? parent : undefined
}

async function appendAll(
  run: RunContext,
  target: AppendTarget,
  events: readonly StoredSessionEvent[],
  textLengths: readonly number[],
  firstAtLeast: number,
): Promise<number> {
  let appends = 0
  try {
    if (events.length === 0) {
      await run.persistence.append(target, [])
      return 1
    }
    let at = 0
    while (at < events.length) {
      throwIfAborted(run.signal)
      // Up to batchEvents events and about batchBytes of source text; the first batch holds at least firstAtLeast.
      let end = at
      let bytes = 0
      while (end < events.length && (end < firstAtLeast || (end - at < run.batchEvents && (end === at || bytes < run.batchBytes)))) {
        bytes += textLengths[end] ?? 0
        end += 1
      }
      await run.persistence.append(target, events.slice(at, end))
      appends += 1
      at = end
    }
    return appends
  } catch (error) {
    if (isCancel(error, run.signal)) throw error
    const code = error instanceof Error && 'code' in error ? String(error.code) : 'UNKNOWN'
    throw new SessionFailure(
      events.length,
      'IMPORT_V0_PERSISTENCE_FAILED',
      `Writing the imported session failed (${code}: ${(error as Error).message}); the next run continues from what was written.`,
      error,
    )
  }
}

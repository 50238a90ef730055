import { constants, promises as fsp } from 'node:fs'
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path'
import { SessionId } from '@dsh/session'
import type { SessionPersistence } from '@dsh/session-persistence'
import { toV0Event, toV0Header } from './convert.js'
import { ImportV0Error, ioFailure, throwIfAborted } from './errors.js'
import { encodeSegment, type V0Compression, v0LogPath } from './layout.js'
import type { V0Event } from './v0-types.js'
import { writeV0Log } from './writer.js'

/**
 * `exportV0`: dsh sessions back into a v0 root, so that an import can be
 * checked by a round trip (and so the harness can read what dsh wrote).
 *
 * Invariants: imported events come back as the exact lines they were read
 * from (see `convert.ts`); a seeded session is written whole (v0 logs copy
 * their inherited prefix), with `seedLength` = its exact cut; one frame per
 * turn (a batch ends after each `turn/end`); an existing log in the target is
 * never overwritten.
 *
 * All or nothing: every id is checked (a session id, named once, persisted
 * here) before anything is written; the logs are then written into a staging
 * directory inside the target (`.dsh-export-*`, which `listV0Logs` never
 * reads), each once its path in the target was found free, and linked into
 * place only once every session was read and written. A failure or cancellation at any
 * step removes what the export wrote — the staging directory, logs already
 * placed, directories it created, the target itself when it created it — so
 * a corrected retry starts from the same target.
 */

export interface ExportV0Options {
  readonly ids: readonly string[]
  readonly persistence: SessionPersistence
  /** The v0 root to write into (created if missing). */
  readonly to: string
  /** `zstd` (default) or `none`. */
  readonly compression?: V0Compression
  /**
   * Pack runs of text/reasoning/tool-call deltas into `*-chunks` rows as the
   * harness does (default false: one line per event, so that a log imported
   * without rows comes back byte for byte).
   */
  readonly packChunks?: boolean
  readonly signal?: AbortSignal
}

export interface ExportV0Result {
  readonly to: string
  readonly sessions: readonly { readonly id: string; readonly path: string; readonly events: number }[]
}

export async function exportV0(options: ExportV0Options): Promise<ExportV0Result> {
  const to = resolve(options.to)
  const compression = options.compression ?? 'zstd'
  await checkIds(options)
  if (options.ids.length === 0) return { to, sessions: [] }
  const created = await makeTarget(to)
  let staging: string | undefined
  const placed: string[] = []
  const madeDirs: { deepest: string; top: string }[] = []
  let done = false
  try {
    staging = await fsp.mkdtemp(join(to, STAGING_PREFIX)).catch((error: unknown) => {
      throw ioFailure(error, 'create a staging directory in', to)
    })
    const staged: { id: string; staged: string; path: string; events: number }[] = []
    for (const id of options.ids) {
      throwIfAborted(options.signal)
      const observation = await options.persistence.inspect(SessionId(id), options.signal)
      const header = toV0Header(observation.header, observation.inheritedEventCount)
      const path = v0LogPath(to, header.id, header.cwd, compression)
      await refuseExisting(to, path)
      const events = observation.events.map(toV0Event)
      const written = await writeV0Log(staging, header, turnBatches(events), { compression, packChunks: options.packChunks === true })
      staged.push({ id, staged: written, path, events: events.length })
    }
    throwIfAborted(options.signal)
    for (const entry of staged) {
      const made = await fsp.mkdir(dirname(entry.path), { recursive: true, mode: 0o700 }).catch((error: unknown) => {
        throw ioFailure(error, 'create', dirname(entry.path))
      })
      if (made !== undefined) madeDirs.push({ deepest: dirname(entry.path), top: made })
      await place(entry.staged, entry.path)
      placed.push(entry.path)
    }
    done = true
    return { to, sessions: staged.map(({ id, path, events }) => ({ id, path, events })) }
  } catch (error) {
    // Best effort: a step of the rollback that fails must not hide the error that caused it.
    for (const path of placed) await fsp.rm(path, { force: true }).catch(() => undefined)
    for (const { deepest, top } of madeDirs.reverse()) await removeEmptyDirs(deepest, top)
    throw error
  } finally {
    if (staging !== undefined) await fsp.rm(staging, { recursive: true, force: true }).catch(() => undefined)
    if (!done && created !== undefined) await removeEmptyDirs(to, created)
  }
}

/** The staging directory's name prefix: not a v0 project directory (`--<key>--`, `_no-cwd`), so an import never reads it. */
const STAGING_PREFIX = '.dsh-export-'

/**
 * Every id of an export: a valid session id and v0 directory name, named
 * once, and persisted here. Nothing is written before this passes.
 */
async function checkIds(options: ExportV0Options): Promise<void> {
  const seen = new Set<string>()
  for (const id of options.ids) {
    SessionId(id)
    encodeSegment(id)
    if (seen.has(id)) {
      throw new ImportV0Error(
        'IMPORT_V0_INVALID_OPTION',
        `Session ${JSON.stringify(id)} is named more than once in this export; name each session once.`,
        { details: { id, reason: 'duplicate-id' } },
      )
    }
    seen.add(id)
  }
  for (const id of options.ids) {
    throwIfAborted(options.signal)
    if ((await options.persistence.stat(SessionId(id), options.signal)) === undefined) {
      throw new ImportV0Error('IMPORT_V0_NOT_FOUND', `Session ${JSON.stringify(id)} is not persisted here; 'dsh sessions' lists the ids.`, {
        details: { id },
      })
    }
  }
}

/**
 * Creates the target directory (0700) when missing; resolves the topmost
 * directory it created, if any. A target under a file (ENOTDIR) is an
 * option error like a target that is a file: the path given cannot be a
 * directory. Any other failure is `IMPORT_V0_IO`.
 */
async function makeTarget(to: string): Promise<string | undefined> {
  const stat = await fsp.stat(to).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return undefined
    if (error.code === 'ENOTDIR') {
      throw new ImportV0Error(
        'IMPORT_V0_INVALID_OPTION',
        `The export target ${to} is under a file, not a directory, so it cannot be created; pass a directory (created if missing).`,
        { cause: error, details: { to, reason: 'not-a-directory', code: error.code } },
      )
    }
    throw ioFailure(error, 'read the export target', to)
  })
  if (stat === undefined) {
    return fsp.mkdir(to, { recursive: true, mode: 0o700 }).catch((error: unknown) => {
      throw ioFailure(error, 'create the export target', to)
    })
  }
  if (!stat.isDirectory()) {
    throw new ImportV0Error(
      'IMPORT_V0_INVALID_OPTION',
      `The export target ${to} exists and is not a directory; pass a directory (created if missing).`,
      {
        details: { to, reason: 'not-a-directory' },
      },
    )
  }
  return undefined
}

function exists(path: string): ImportV0Error {
  return new ImportV0Error(
    'IMPORT_V0_EXPORT_EXISTS',
    `A v0 log already exists at ${path}; export into an empty directory or delete that session first.`,
    { details: { path } },
  )
}

/**
 * Refuses a log path that is already taken, before its session is read, and
 * one whose project or session directory in `to` is something other than a
 * directory (a symlink would place the log outside `to`, where an import of
 * `to` never looks).
 */
async function refuseExisting(to: string, path: string): Promise<void> {
  for (const dir of [dirname(dirname(path)), dirname(path)]) {
    const stat = await fsp.lstat(dir).catch((error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return undefined
      throw ioFailure(error, 'read', dir)
    })
    if (stat !== undefined && !stat.isDirectory()) {
      throw new ImportV0Error(
        'IMPORT_V0_INVALID_OPTION',
        `The export target ${to} holds ${dir}, which is ${stat.isSymbolicLink() ? 'a symbolic link' : 'not a directory'}; the v0 layout keeps a directory there and an export never writes through a link. Remove it or export into another directory.`,
        { details: { to, path: dir, reason: 'not-a-directory' } },
      )
    }
  }
  const taken = await fsp.lstat(path).then(
    () => true,
    (error: NodeJS.ErrnoException) => {
      if (error.code === 'ENOENT') return false
      throw ioFailure(error, 'read', path)
    },
  )
  if (taken) throw exists(path)
}

/**
 * Puts a staged log at `path` without ever replacing a file there: a hard
 * link (the staging directory is on the target's file system), or an
 * exclusive copy where the file system has no hard links.
 */
async function place(staged: string, path: string): Promise<void> {
  try {
    await fsp.link(staged, path)
    return
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'EEXIST') throw exists(path)
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'ENOSYS' && code !== 'EXDEV' && code !== 'EOPNOTSUPP')
      throw ioFailure(error, 'link the exported log to', path)
  }
  try {
    await fsp.copyFile(staged, path, constants.COPYFILE_EXCL)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') throw exists(path)
    throw ioFailure(error, 'copy the exported log to', path)
  }
}

/** Removes `deepest` and its parents up to `top` (inclusive) while they are empty; a directory something else wrote into stays. */
async function removeEmptyDirs(deepest: string, top: string): Promise<void> {
  const rel = relative(top, deepest)
  if (rel === '..' || rel.startsWith(`..${sep}`) || isAbsolute(rel)) return
  for (let dir = deepest; ; dir = dirname(dir)) {
    try {
      await fsp.rmdir(dir)
    } catch {
      return
    }
    if (dir === top || dirname(dir) === dir) return
  }
}

/** Splits events into batches that end after each `turn/end`. */
function turnBatches(events: readonly V0Event[]): V0Event[][] {
  const batches: V0Event[][] = []
  let batch: V0Event[] = []
  for (const event of events) {
    batch.push(event)
    if (event.type === 'turn/end') {
      batches.push(batch)
      batch = []
    }
  }
  if (batch.length > 0) batches.push(batch)
  return batches
}

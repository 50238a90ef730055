import type { Dirent } from 'node:fs'
import { promises as fsp } from 'node:fs'
import { join } from 'node:path'
import { ImportV0Error } from './errors.js'
import { decodeSegment, NO_CWD_DIR, PLAIN_LOG, type V0Compression, ZSTD_LOG } from './layout.js'

/**
 * Finding the session logs of a v0 root (`<root>/<project>/<session>/session.jsonl[.zstd]`).
 * Only directory entries are read; nothing is followed, opened or changed.
 *
 * Invariants: a log is listed only when it is a regular file in a real
 * session directory of a real project directory (symbolic links are never
 * followed: a v0 root's sessions are files under it). Anything that stands
 * where the layout keeps a project directory, a session directory or a log
 * but cannot be one — a link, a FIFO, a directory named like a log, an entry
 * that cannot be read (only ENOENT means absent) — is a `V0RootFault`, so an
 * import reports it instead of silently importing less. Entries the layout
 * does not name (other files in the root or a project directory, other files
 * in a session directory, which the harness keeps for its own artifacts) are
 * left alone.
 */

/** A session directory of a v0 root: where its log is, and the id its directory name encodes. */
export interface V0LogEntry {
  readonly path: string
  readonly compression: V0Compression
  /** The id the session directory name encodes, when it is a valid encoding. */
  readonly dirId: string | undefined
}

/** An entry where the v0 layout keeps a project directory, session directory or log that cannot be read as one. */
export interface V0RootFault {
  readonly path: string
  /** The id the session directory name encodes, for a fault at or in a session directory. */
  readonly dirId: string | undefined
  /** `IMPORT_V0_IO`, `details.reason` saying which kind: `'unreadable'`, `'symlink'`, `'not-a-directory'` or `'not-a-file'`. */
  readonly error: ImportV0Error
}

export interface V0RootScan {
  /** Every session log, sorted by path. */
  readonly logs: V0LogEntry[]
  /** Every entry that stands where the layout keeps a part of a session but cannot be read as one, sorted by path. */
  readonly faults: V0RootFault[]
}

/**
 * The session logs of a v0 root and the entries in their places that cannot
 * be read as such. Throws `IMPORT_V0_ROOT_INVALID` when the root itself
 * cannot be listed.
 */
export async function scanV0Root(root: string): Promise<V0RootScan> {
  const logs: V0LogEntry[] = []
  const faults: V0RootFault[] = []
  let projects: Dirent[]
  try {
    projects = await fsp.readdir(root, { withFileTypes: true })
  } catch (error) {
    const code = errnoOf(error)
    throw new ImportV0Error('IMPORT_V0_ROOT_INVALID', `The v0 root ${root} cannot be listed (${code}): ${(error as Error).message}`, {
      cause: error,
      details: { path: root, code },
    })
  }
  for (const project of byName(projects)) {
    if (!isProjectName(project.name)) continue
    const projectPath = join(root, project.name)
    if (!project.isDirectory()) {
      faults.push({ path: projectPath, dirId: undefined, error: notADirectory(projectPath, project, 'project') })
      continue
    }
    let sessions: Dirent[]
    try {
      sessions = await fsp.readdir(projectPath, { withFileTypes: true })
    } catch (error) {
      faults.push({ path: projectPath, dirId: undefined, error: unreadable(projectPath, error, 'project directory') })
      continue
    }
    for (const session of byName(sessions)) {
      const dir = join(projectPath, session.name)
      const dirId = decodeSegment(session.name)
      if (!session.isDirectory()) {
        // A link is where a session directory would be; other files there are not the layout's (left alone).
        if (session.isSymbolicLink() && dirId !== undefined)
          faults.push({ path: dir, dirId, error: notADirectory(dir, session, 'session') })
        continue
      }
      for (const [file, compression] of [
        [ZSTD_LOG, 'zstd'],
        [PLAIN_LOG, 'none'],
      ] as const) {
        const path = join(dir, file)
        let stat: Awaited<ReturnType<typeof fsp.lstat>> | undefined
        try {
          stat = await fsp.lstat(path)
        } catch (error) {
          if (errnoOf(error) === 'ENOENT') continue
          // The directory cannot be searched: one fault for it, whatever it holds.
          faults.push({ path: dir, dirId, error: unreadable(dir, error, 'session directory') })
          break
        }
        if (stat.isFile()) logs.push({ path, compression, dirId })
        else faults.push({ path, dirId, error: notALog(path, stat) })
      }
    }
  }
  return { logs: logs.sort(byPath), faults: faults.sort(byPath) }
}

/**
 * Every session log of a v0 root (`<root>/<project>/<session>/session.jsonl[.zstd]`),
 * sorted by path: the logs of `scanV0Root`, without the entries it reports
 * as faults.
 */
export async function listV0Logs(root: string): Promise<V0LogEntry[]> {
  return (await scanV0Root(root)).logs
}

/**
 * True when `dir` holds at least one v0 session log (`--<project>--/<id>/session.jsonl[.zstd]`
 * or `_no-cwd/<id>/…`): for commands that meet a directory that is not a dsh
 * root and can suggest `dsh import --from dsh-v0`. Reads directory entries only.
 */
export async function isV0Root(dir: string): Promise<boolean> {
  try {
    return (await listV0Logs(dir)).length > 0
  } catch {
    return false
  }
}

function isProjectName(name: string): boolean {
  return name === NO_CWD_DIR || (name.startsWith('--') && name.endsWith('--') && name.length >= 4)
}

function byName(entries: Dirent[]): Dirent[] {
  return entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
}

function byPath(a: { path: string }, b: { path: string }): number {
  return a.path < b.path ? -1 : a.path > b.path ? 1 : 0
}

function errnoOf(error: unknown): string {
  return typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : 'UNKNOWN'
}

function unreadable(path: string, error: unknown, what: string): ImportV0Error {
  const code = errnoOf(error)
  return new ImportV0Error(
    'IMPORT_V0_IO',
    `The ${what} ${path} cannot be read (${code}), so what it holds was not imported: give this user read and search permission on it and run the import again.`,
    { cause: error, details: { path, code, reason: 'unreadable' } },
  )
}

function kindOf(entry: { isSymbolicLink(): boolean; isDirectory(): boolean; isFIFO(): boolean; isSocket(): boolean }): string {
  if (entry.isSymbolicLink()) return 'a symbolic link'
  if (entry.isDirectory()) return 'a directory'
  if (entry.isFIFO()) return 'a FIFO'
  if (entry.isSocket()) return 'a socket'
  return 'a device or other special file'
}

function notADirectory(path: string, entry: Dirent, what: 'project' | 'session'): ImportV0Error {
  const link = entry.isSymbolicLink()
  const kind = link ? 'a symbolic link' : entry.isFile() ? 'a regular file' : kindOf(entry)
  return new ImportV0Error(
    'IMPORT_V0_IO',
    `${path} is ${kind} where the v0 layout keeps a ${what} directory; ${link ? 'links are not followed (a v0 root holds its sessions itself): replace it with the directory it points to' : 'put the directory there'}, then run the import again.`,
    { details: { path, reason: link ? 'symlink' : 'not-a-directory' } },
  )
}

function notALog(
  path: string,
  stat: { isSymbolicLink(): boolean; isDirectory(): boolean; isFIFO(): boolean; isSocket(): boolean },
): ImportV0Error {
  const link = stat.isSymbolicLink()
  return new ImportV0Error(
    'IMPORT_V0_IO',
    `${path} is ${kindOf(stat)}, not a regular file: the v0 layout keeps a session log there; ${link ? 'links are not followed (a v0 root holds its sessions itself): replace it with the file it points to' : 'put the log file there'}, then run the import again.`,
    { details: { path, reason: link ? 'symlink' : 'not-a-file' } },
  )
}

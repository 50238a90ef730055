import { type Dirent, promises as fsp } from 'node:fs'
import { join } from 'node:path'
import { throwIfAborted } from '@dsh/context'
import { persistenceCancelled as cancelled } from '@dsh/session-persistence/backend'
import { ioError } from './errors.js'
import { isErrno } from './fs-io.js'
import { decodeSessionDirName, isSessionDirName } from './id-encoding.js'
import { DELETING_FILE, LOCK_FILE } from './session-writer.js'
import type { LogLessDir } from './types.js'
import { liveHolder } from './writer-lock.js'

/**
 * The session directories of `root` that hold no log (`logFileName`) while
 * no writer is creating or deleting one: a log removed outside dsh, or a
 * creation that crashed before its first append. `list()` leaves such a
 * directory out (it persists no session), so without this a session whose
 * log was removed vanishes from every listing without a word.
 *
 * Not reported: a directory whose creator or deleter holds its lock (a live
 * process), one with a `deleting` marker (a delete through dsh, finished or
 * crashed midway), and anything that is not a directory or whose log entry
 * exists in any form (`list()` and `verify` report those). A directory seen
 * without a log is looked at once more after the pass, so a creation that
 * took its lock or published its log meanwhile is not reported. Only reads:
 * never creates, repairs or removes anything.
 */
export async function findLogLessDirs(root: string, logFileName: string, signal: AbortSignal | undefined): Promise<LogLessDir[]> {
  throwIfAborted(signal, cancelled)
  let entries: Dirent[]
  try {
    entries = await fsp.readdir(root, { withFileTypes: true })
  } catch (error) {
    throw ioError(`read the root ${root}`, error)
  }
  const seen: string[] = []
  for (const entry of entries) {
    if (!entry.isDirectory() || !isSessionDirName(entry.name)) continue
    throwIfAborted(signal, cancelled)
    if (await holdsNoLog(join(root, entry.name), logFileName)) seen.push(entry.name)
  }
  const found: LogLessDir[] = []
  for (const name of seen) {
    throwIfAborted(signal, cancelled)
    const dir = join(root, name)
    if (!(await holdsNoLog(dir, logFileName))) continue
    found.push(
      Object.freeze({
        dir,
        id: decodeSessionDirName(name),
        code: 'SESSION_PERSISTENCE_NOT_FOUND' as const,
        message: `The session directory ${dir} holds no log (${logFileName}) and no process is writing one: the log was removed outside dsh, or a creation crashed before its first append. Restore the log from a backup; if the session is not wanted, remove the directory.`,
      }),
    )
  }
  return found.sort((a, b) => (a.dir < b.dir ? -1 : a.dir > b.dir ? 1 : 0))
}

/** True when `dir` is a directory without a log entry, a live writer's lock or a deletion marker. */
async function holdsNoLog(dir: string, logFileName: string): Promise<boolean> {
  if (await exists(join(dir, logFileName))) return false
  try {
    if (!(await fsp.lstat(dir)).isDirectory()) return false
  } catch {
    // Gone (deleted meanwhile) or unreadable: `list()` reports what it cannot read.
    return false
  }
  if (await exists(join(dir, DELETING_FILE))) return false
  try {
    return (await liveHolder(join(dir, LOCK_FILE))) === undefined
  } catch {
    // A lock file that cannot be read may name a live writer.
    return false
  }
}

/** Whether `path` names any entry; an entry that cannot be looked at counts as there (not ours to report). */
async function exists(path: string): Promise<boolean> {
  try {
    await fsp.lstat(path)
    return true
  } catch (error) {
    return !isErrno(error, 'ENOENT')
  }
}

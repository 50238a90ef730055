import { randomBytes } from 'node:crypto'
import { closeSync, constants, promises as fsp, fstatSync, linkSync, openSync, readdirSync, statSync, unlinkSync, writeSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { persistenceError } from '@dsh/session-persistence/backend'
import { ioError } from './errors.js'
import { isErrno, isLiveTemp, tempSibling } from './fs-io.js'
import { isAlive, ownIdentity, type ProcessIdentity, sameStart } from './process-identity.js'

/** What a lock file says about its holder: the process (its start time too, so a reused pid is not mistaken for it) and this lock's nonce. */
interface LockOwner extends ProcessIdentity {
  readonly nonce: string
  readonly acquiredAt: number
}

// Locks held by any instance in this process, so a second instance in the
// same process sees its sibling's lock as live (same pid) but a leftover
// from an earlier process that happened to have our pid as stale.
const HELD_KEY = Symbol.for('@dsh/session-persistence-jsonl/held-locks')
const registry = globalThis as Record<symbol, unknown>
registry[HELD_KEY] ??= new Set<string>()
const held = registry[HELD_KEY] as Set<string>

/** How often a writer re-checks that its lock file is still its own. */
const VERIFY_INTERVAL_MS = 1000

/**
 * The cross-process single-writer lock of one session directory: a file
 * published with `link` (so it appears with its content, or not at all)
 * that names the holder's pid, host and process start time. A holder that
 * died is detected (no such pid, or the pid belongs to a process that
 * started later) and its lock is taken over; a live holder gives
 * `SESSION_PERSISTENCE_LOCKED`. The holder keeps the lock file open so its
 * inode cannot be reused, and re-checks the path still names that inode
 * before writing.
 */
export class WriterLock {
  readonly path: string
  /** The held lock file's descriptor (keeps its inode from being reused). */
  readonly #fd: number
  readonly #ino: number
  readonly #nonce: string
  #released = false
  #verifiedAt = 0

  private constructor(path: string, fd: number, ino: number, nonce: string) {
    this.path = path
    this.#fd = fd
    this.#ino = ino
    this.#nonce = nonce
  }

  static async acquire(path: string, sessionLabel: string): Promise<WriterLock> {
    await removeStaleTemps(path)
    for (let attempt = 0; attempt < 8; attempt++) {
      const { host, pid, start } = ownIdentity()
      const owner: LockOwner = {
        pid,
        host,
        start,
        nonce: randomBytes(12).toString('hex'),
        acquiredAt: Date.now(),
      }
      // A lock only matters while its holder lives, so it need not survive a power loss.
      const taken = publishHeld(path, Buffer.from(`${JSON.stringify(owner)}\n`))
      if (taken !== undefined) {
        held.add(owner.nonce)
        try {
          // The path must still name our brand-new file (nobody broke it between the link and this check).
          let current: number | undefined
          try {
            current = statSync(path).ino
          } catch (error) {
            if (!isErrno(error, 'ENOENT')) throw error
          }
          if (current !== taken.ino) {
            closeSync(taken.fd)
            held.delete(owner.nonce)
            continue
          }
          const lock = new WriterLock(path, taken.fd, taken.ino, owner.nonce)
          lock.#verifiedAt = Date.now()
          return lock
        } catch (error) {
          held.delete(owner.nonce)
          closeSync(taken.fd)
          throw error
        }
      }
      const holder = await readOwner(path)
      if (holder === undefined) continue // released meanwhile (or unreadable for a moment); try again
      if (holderAlive(holder)) {
        throw persistenceError(
          'SESSION_PERSISTENCE_LOCKED',
          `Session ${sessionLabel} is being written by process ${holder.pid} on ${holder.host}; only one writer per session is allowed. Close that writer first${holder.host === ownIdentity().host ? '' : ` (if host ${holder.host} is gone, delete ${path})`}.`,
          { details: { pid: holder.pid, host: holder.host, lockFile: path } },
        )
      }
      await breakStaleLock(path, holder)
    }
    throw persistenceError(
      'SESSION_PERSISTENCE_LOCKED',
      `Session ${sessionLabel}: could not take the writer lock ${path} (it keeps changing hands).`,
      { details: { lockFile: path } },
    )
  }

  /** Whether `verify` would check now (a synchronous test: an append that need not check awaits nothing). */
  verifyDue(intervalMs = VERIFY_INTERVAL_MS): boolean {
    return this.#released || Date.now() - this.#verifiedAt >= intervalMs
  }

  /**
   * Throws `SESSION_PERSISTENCE_LOCKED` when the lock file is not ours
   * (removed by hand, or taken over by a process that judged it stale).
   * Checked at most every `intervalMs` so appends stay cheap.
   */
  async verify(sessionLabel: string, intervalMs = VERIFY_INTERVAL_MS): Promise<void> {
    if (this.#released) throw persistenceError('SESSION_PERSISTENCE_LOCKED', `Session ${sessionLabel}: the writer lock was released.`)
    const now = Date.now()
    if (now - this.#verifiedAt < intervalMs) return
    let ino: number | undefined
    try {
      ino = (await fsp.stat(this.path)).ino
    } catch (error) {
      if (!isErrno(error, 'ENOENT')) throw ioError(`check the writer lock ${this.path} of session ${sessionLabel}`, error)
    }
    if (ino !== this.#ino) {
      throw persistenceError(
        'SESSION_PERSISTENCE_LOCKED',
        `Session ${sessionLabel}: this writer lost its lock (${this.path} was removed or replaced); stop writing and reopen the session.`,
        { details: { lockFile: this.path } },
      )
    }
    this.#verifiedAt = now
  }

  get released(): boolean {
    return this.#released
  }

  /** Removes the lock file if it is still ours. */
  async release(): Promise<void> {
    if (this.#released) return
    this.#released = true
    held.delete(this.#nonce)
    try {
      const ino = (await fsp.stat(this.path)).ino
      if (ino === this.#ino) await fsp.unlink(this.path)
    } catch (error) {
      if (!isErrno(error, 'ENOENT')) throw error
    } finally {
      closeSync(this.#fd)
    }
  }
}

/**
 * The process holding the lock at `path`, when it is alive (a holder on
 * another host counts as alive); `undefined` when there is no lock or its
 * holder died. For deciding whether a session without a published log is a
 * creation still in progress (its creator holds the lock) or a stale one.
 */
export async function liveHolder(path: string): Promise<{ readonly pid: number; readonly host: string } | undefined> {
  const holder = await readOwner(path)
  return holder !== undefined && holderAlive(holder) ? { pid: holder.pid, host: holder.host } : undefined
}

/**
 * Publishes `data` at `path` without overwriting (a temporary file hard-linked
 * into place) and keeps the file open: the held descriptor is the lock's
 * inode. `undefined` when `path` exists. No fsync: a lock only matters while
 * its holder lives.
 */
function publishHeld(path: string, data: Buffer): { fd: number; ino: number } | undefined {
  // Small metadata operations, made synchronously: a writer takes its lock once.
  const temp = tempSibling(path)
  const fd = openSync(temp, constants.O_RDWR | constants.O_CREAT | constants.O_EXCL, 0o600)
  let linked = false
  try {
    // One write of a few dozen bytes to a new file is never short.
    writeSync(fd, data, 0, data.length, 0)
    linkSync(temp, path)
    linked = true
  } catch (error) {
    if (!isErrno(error, 'EEXIST')) {
      closeSync(fd)
      try {
        unlinkSync(temp)
      } catch {}
      throw error
    }
  }
  try {
    unlinkSync(temp)
  } catch {}
  if (!linked) {
    closeSync(fd)
    return undefined
  }
  return { fd, ino: fstatSync(fd).ino }
}

/**
 * Removes the temporary files killed processes left in the lock's directory
 * (the session's): `.<name>.tmp-<pid>.<start>-<random>` from publishing or
 * breaking a lock, and from a create, fork or rewrite of the log. Only those
 * whose process has exited (`isLiveTemp`): nobody will link them, and each
 * may be as large as a log, so what crashes leave is bounded by the next
 * writer of the session instead of growing with every crash.
 */
async function removeStaleTemps(path: string): Promise<void> {
  const dir = dirname(path)
  let names: string[]
  try {
    names = readdirSync(dir)
  } catch {
    return // the directory's absence is reported by the acquire itself
  }
  for (const name of names) {
    if (!name.startsWith('.') || !name.includes('.tmp-') || isLiveTemp(name)) continue
    await fsp.unlink(join(dir, name)).catch(() => {})
  }
}

async function readOwner(path: string): Promise<LockOwner | undefined> {
  let text: string
  try {
    text = await fsp.readFile(path, 'utf8')
  } catch (error) {
    // No lock, or no session directory (a file in its place is reported by whoever opens the log).
    if (isErrno(error, 'ENOENT', 'ENOTDIR')) return undefined
    throw ioError(`read the writer lock ${path}`, error)
  }
  try {
    const owner = JSON.parse(text) as Partial<LockOwner>
    if (typeof owner.pid === 'number' && typeof owner.host === 'string' && typeof owner.nonce === 'string') return owner as LockOwner
  } catch {
    // fall through: an unreadable lock file (written by hand?) names no live holder
  }
  return { pid: -1, host: ownIdentity().host, start: null, nonce: `unreadable:${text}`, acquiredAt: 0 }
}

/** Whether a lock's holder may still hold it: in this process, a lock some backend here holds; elsewhere, a live process (`isAlive`). */
function holderAlive(owner: LockOwner): boolean {
  const self = ownIdentity()
  if (owner.host === self.host && owner.pid === self.pid && sameStart(owner.start, self.start)) return held.has(owner.nonce)
  return isAlive(owner)
}

/**
 * Removes a dead holder's lock without ever removing a live one: the file
 * is first renamed aside, and only deleted if it is the very lock judged
 * stale; a lock that was replaced in between is put back.
 */
async function breakStaleLock(path: string, stale: LockOwner): Promise<void> {
  const aside = tempSibling(path)
  try {
    await fsp.rename(path, aside)
  } catch (error) {
    if (isErrno(error, 'ENOENT')) return
    throw error
  }
  const moved = await readOwner(aside)
  if (moved?.nonce === stale.nonce) {
    await fsp.unlink(aside).catch(() => {})
    return
  }
  try {
    await fsp.link(aside, path)
  } catch (error) {
    if (!isErrno(error, 'EEXIST')) throw error
  } finally {
    await fsp.unlink(aside).catch(() => {})
  }
}

import { closeSync, constants, linkSync, openSync, readFileSync, renameSync, unlinkSync, writeSync } from 'node:fs'
import { isErrno, randomHex, tempSibling } from './fs-io.js'
import { isAlive, ownIdentity, type ProcessIdentity, sameStart } from './process-identity.js'

/**
 * The change journal's replacement lock, `changes.journal.lock`: held by the
 * one process that replaces the journal file — compacting it, or publishing
 * a new one where it is missing or its header is damaged — so no two
 * replacements race and a replacement never overwrites a journal it did not
 * read. Appends never take it.
 *
 * A file published with `link` (it appears with its content or not at all)
 * naming the holder (host, pid, start time, thread) and a nonce. Everything a
 * holder does under it is synchronous, so a holder that died (its process
 * gone) left it stale: it is broken without ever removing a live holder's
 * lock (renamed aside, removed only if it is the very lock judged stale).
 */
interface LockOwner extends ProcessIdentity {
  readonly thread: number
  readonly nonce: string
}

export interface HeldLock {
  readonly path: string
  readonly nonce: string
}

/** The lock file of the journal at `journal`. */
export function lockPathOf(journal: string): string {
  return `${journal}.lock`
}

/** Takes the lock if it is free or its holder died; `undefined` when a live process holds it. */
export function tryLock(journal: string): HeldLock | undefined {
  const path = lockPathOf(journal)
  for (let attempt = 0; attempt < 4; attempt++) {
    const { host, pid, start } = ownIdentity()
    const owner: LockOwner = { host, pid, start, thread: ownThread(), nonce: randomHex(12) }
    if (publish(path, Buffer.from(`${JSON.stringify(owner)}\n`))) return { path, nonce: owner.nonce }
    const holder = readOwner(path)
    if (holder === undefined) continue // released meanwhile
    if (holderAlive(holder)) return undefined
    breakStale(path, holder.nonce)
  }
  return undefined
}

/** The live holder of the journal's lock, if any (for messages and for waiting on it). */
export function liveLockHolder(journal: string): ProcessIdentity | undefined {
  const holder = readOwner(lockPathOf(journal))
  return holder !== undefined && holderAlive(holder) ? holder : undefined
}

export function releaseLock(lock: HeldLock): void {
  if (readOwner(lock.path)?.nonce !== lock.nonce) return
  try {
    unlinkSync(lock.path)
  } catch {
    // removed meanwhile
  }
}

/** Blocks the calling thread for `ms` milliseconds (waiting on another process's replacement, which takes milliseconds). */
export function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
}

/** Publishes `data` at `path` without overwriting; false when `path` exists. */
function publish(path: string, data: Buffer): boolean {
  const temp = tempSibling(path)
  const fd = openSync(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600)
  try {
    writeSync(fd, data, 0, data.length, 0)
    linkSync(temp, path)
    return true
  } catch (error) {
    if (isErrno(error, 'EEXIST')) return false
    throw error
  } finally {
    closeSync(fd)
    try {
      unlinkSync(temp)
    } catch {}
  }
}

function readOwner(path: string): LockOwner | undefined {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (error) {
    if (isErrno(error, 'ENOENT')) return undefined
    throw error
  }
  try {
    const owner = JSON.parse(text) as Partial<LockOwner>
    if (typeof owner.pid === 'number' && typeof owner.host === 'string' && typeof owner.nonce === 'string')
      return { host: owner.host, pid: owner.pid, start: owner.start ?? null, thread: owner.thread ?? 0, nonce: owner.nonce }
  } catch {
    // an unreadable lock file (written by hand?) names no live holder
  }
  return { host: ownIdentity().host, pid: -1, start: null, thread: 0, nonce: `unreadable:${text}` }
}

/**
 * Whether the lock's holder may still hold it. This thread holds it only
 * inside a synchronous replacement, so a lock naming this very thread is a
 * leftover; another thread of this process, or a live process, holds it.
 */
function holderAlive(owner: LockOwner): boolean {
  const self = ownIdentity()
  if (owner.host === self.host && owner.pid === self.pid && sameStart(owner.start, self.start)) return owner.thread !== ownThread()
  return isAlive(owner)
}

/** This thread's id (0 on the main thread); `node:worker_threads` is loaded at the first lock taken, not at import. */
function ownThread(): number {
  return process.getBuiltinModule('node:worker_threads').threadId
}

function breakStale(path: string, nonce: string): void {
  const aside = tempSibling(path)
  try {
    renameSync(path, aside)
  } catch (error) {
    if (isErrno(error, 'ENOENT')) return
    throw error
  }
  if (readOwner(aside)?.nonce === nonce) {
    try {
      unlinkSync(aside)
    } catch {}
    return
  }
  // Replaced between our read and the rename: put the live lock back.
  try {
    linkSync(aside, path)
  } catch (error) {
    if (!isErrno(error, 'EEXIST')) throw error
  } finally {
    try {
      unlinkSync(aside)
    } catch {}
  }
}

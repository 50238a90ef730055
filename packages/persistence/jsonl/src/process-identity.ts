import { readFileSync } from 'node:fs'

/**
 * Which process wrote a lock, a change journal record, a `deleting` marker
 * or a temporary file, and whether it still runs. A process is its host, its
 * pid and its Linux start time (clock ticks since boot, from
 * `/proc/<pid>/stat`): a pid the kernel handed to a later process has
 * another start time, so the later process is never mistaken for the one
 * that wrote. Where the start time cannot be read (not Linux) it is `null`
 * and only the pid is compared.
 *
 * Nothing is read at import: this process's identity is computed at its
 * first use (a follower that finds nothing in flight loads no `node:os` and
 * reads no `/proc` file).
 */
export interface ProcessIdentity {
  readonly host: string
  readonly pid: number
  /** Linux process start time (field 22 of `/proc/<pid>/stat`); `null` where unavailable. */
  readonly start: string | null
}

let own: ProcessIdentity | undefined

/** This process. */
export function ownIdentity(): ProcessIdentity {
  own ??= Object.freeze({ host: process.getBuiltinModule('node:os').hostname(), pid: process.pid, start: processStart(process.pid) })
  return own
}

/** The start time of process `pid` (Linux); `null` where unavailable or when there is no such process. */
export function processStart(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // The fields after the parenthesised command name (which may hold spaces); starttime is field 22.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null
  } catch {
    return null
  }
}

/**
 * Whether the process `identity` names may still be running. A process on
 * another host cannot be checked from here and counts as running; so does
 * one whose pid exists but whose start time cannot be read.
 */
export function isAlive(identity: ProcessIdentity): boolean {
  const self = ownIdentity()
  if (identity.host !== self.host) return true
  if (!Number.isSafeInteger(identity.pid) || identity.pid <= 0) return false
  if (identity.pid === self.pid) return sameStart(identity.start, self.start)
  return pidExists(identity.pid) && (identity.start === null || sameStart(identity.start, processStart(identity.pid)))
}

/** Whether two start times of one pid may name the same process: equal, or one of them unknown. */
export function sameStart(a: string | null, b: string | null): boolean {
  return a === null || b === null || a === b
}

/** Whether a process with this pid exists on this host (EPERM: it exists, owned by someone else). */
function pidExists(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== 'ESRCH'
  }
}

/** This process as a name part (`<pid>.<start>`, no `-`): what temporary file names carry. */
export function ownTag(): string {
  const { pid, start } = ownIdentity()
  return `${pid}.${start ?? 'x'}`
}

/**
 * Whether the process a name part from `ownTag` names (on this host) may
 * still be running; a part with a pid only is judged by its pid, and one
 * that names no pid counts as running.
 */
export function tagAlive(tag: string): boolean {
  const [pid, start] = tag.split('.')
  const n = Number(pid)
  if (!Number.isSafeInteger(n) || n <= 0) return true
  return isAlive({ host: ownIdentity().host, pid: n, start: start === undefined || start === 'x' ? null : start })
}

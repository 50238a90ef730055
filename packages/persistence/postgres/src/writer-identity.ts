import { createHash } from 'node:crypto'
import { hostname } from 'node:os'
import type { SessionWriter } from '@dsh/session-persistence'

/**
 * Who holds a session's writer lease, as other hosts can learn it: a lease is
 * an advisory lock of the writer connection (`writer.ts`), and the server
 * shows every granted lock with the backend holding it (`pg_locks`) and that
 * backend's `application_name` (`pg_stat_activity`). So each writer
 * connection names its process in its `application_name`:
 * `dsh-writer <pid> <host>`.
 *
 * The server keeps at most 63 bytes of the name and rewrites characters
 * outside printable ASCII. So the name is made of printable ASCII (any other
 * character of the host name becomes `?`) and made to fit before it is sent:
 * the stored name is exactly the one computed here. A host name too long for
 * the room left is cut, and its last nine characters become `~` and eight
 * hex digits of the full name's SHA-256, so two long names that share a
 * prefix stay apart.
 */
const PREFIX = 'dsh-writer'
/** NAMEDATALEN - 1: the server truncates a longer `application_name`. */
const NAME_MAX = 63
const DIGEST_CHARS = 8

/** The `application_name` of a writer connection of process `pid` on `host`. */
export function writerName(pid: number, host: string): string {
  const head = `${PREFIX} ${pid} `
  const printable = host.replace(/[^\x20-\x7e]/g, '?')
  const room = NAME_MAX - head.length
  if (printable.length <= room) return head + printable
  const digest = createHash('sha256').update(host, 'utf8').digest('hex').slice(0, DIGEST_CHARS)
  return `${head}${printable.slice(0, room - DIGEST_CHARS - 1)}~${digest}`
}

let own: string | undefined

/** This process's writer name (the host name is read once). */
export function ownWriterName(): string {
  own ??= writerName(process.pid, hostname())
  return own
}

const NAMED = /^dsh-writer (\d{1,10}) (.+)$/

/**
 * The process a lease holder's `application_name` names. This process's own
 * name answers its exact pid and host; another's answers the host as its
 * name carries it (cut and marked when it was long). A holder whose
 * connection names no dsh writer (another client holding the same advisory
 * lock) answers pid 0 and an empty host: the session is held, by no dsh
 * process.
 */
export function holderNamed(name: string | null | undefined): SessionWriter {
  if (name === ownWriterName()) return Object.freeze({ pid: process.pid, host: hostname() })
  const match = NAMED.exec(name ?? '')
  if (match === null) return Object.freeze({ pid: 0, host: '' })
  return Object.freeze({ pid: Number(match[1]), host: match[2]! })
}

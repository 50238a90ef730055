import { isAbsolute } from 'node:path'
import { SessionId } from './brands.js'
import { SessionError } from './errors.js'
import { idFault } from './limits.js'

export const SESSION_HEADER_VERSION = 1

/**
 * The logical session header: deep-frozen, outside the log. The exact
 * inherited cut is deliberately not a header field; it travels beside the
 * header as `inheritedEventCount`.
 */
export interface SessionHeader {
  readonly version: typeof SESSION_HEADER_VERSION
  readonly id: SessionId
  /** Safe-integer epoch milliseconds. */
  readonly createdAt: number
  /** Absolute working directory, when the runtime has one. */
  readonly cwd?: string
  readonly parentSession?: SessionId
  /** True when the log starts with a seed copied from another session. */
  readonly isSeeded: boolean
  /** 0 for a top-level session; a child is its parent's depth + 1. */
  readonly delegationDepth: number
  readonly origin?: 'subagent'
  readonly agentPreset?: string
}

/**
 * Every header field. Two headers with the same id but a different value in
 * any of these fields belong to different lifecycles (a session deleted and
 * republished under the same id).
 */
export const SESSION_HEADER_WITNESS_FIELDS = [
  'version',
  'id',
  'createdAt',
  'cwd',
  'parentSession',
  'isSeeded',
  'delegationDepth',
  'origin',
  'agentPreset',
] as const satisfies readonly (keyof SessionHeader)[]

/** True when `a` and `b` name the same lifecycle of the same session. */
export function sameLifecycle(a: SessionHeader, b: SessionHeader): boolean {
  return SESSION_HEADER_WITNESS_FIELDS.every((field) => a[field] === b[field])
}

/**
 * Validates an untrusted header (from a file, the wire or a caller) and
 * returns a frozen copy with only the known fields. Throws
 * `SESSION_INVALID_HEADER` saying which field is wrong.
 */
export function parseSessionHeader(input: unknown): SessionHeader {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) bad('the header must be an object')
  const raw = input as Record<string, unknown>
  if (raw.version !== SESSION_HEADER_VERSION) bad(`version must be ${SESSION_HEADER_VERSION}, got ${JSON.stringify(raw.version)}`)
  let id: SessionId
  try {
    id = SessionId(raw.id)
  } catch {
    bad('id must be a non-empty string')
  }
  const fault = idFault(id)
  if (fault !== undefined) bad(`id ${fault}; no store takes such an id`)
  const createdAt = raw.createdAt
  if (typeof createdAt !== 'number' || !Number.isSafeInteger(createdAt) || createdAt < 0 || Object.is(createdAt, -0)) {
    bad('createdAt must be a non-negative safe-integer epoch in milliseconds')
  }
  if (typeof raw.isSeeded !== 'boolean') bad('isSeeded must be a boolean')
  const depth = raw.delegationDepth
  if (typeof depth !== 'number' || !Number.isSafeInteger(depth) || depth < 0 || Object.is(depth, -0)) {
    bad('delegationDepth must be a non-negative integer')
  }
  const header: { -readonly [K in keyof SessionHeader]: SessionHeader[K] } = {
    version: SESSION_HEADER_VERSION,
    id,
    createdAt,
    isSeeded: raw.isSeeded,
    delegationDepth: depth,
  }
  if (raw.cwd !== undefined) {
    if (typeof raw.cwd !== 'string' || !isAbsolute(raw.cwd)) bad('cwd must be an absolute path')
    header.cwd = raw.cwd
  }
  if (raw.parentSession !== undefined) {
    if (typeof raw.parentSession !== 'string' || raw.parentSession.length === 0) bad('parentSession must be a non-empty string')
    header.parentSession = raw.parentSession as SessionId
  }
  if (raw.origin !== undefined) {
    if (raw.origin !== 'subagent') bad(`origin must be 'subagent' when present, got ${JSON.stringify(raw.origin)}`)
    header.origin = 'subagent'
  }
  if (raw.agentPreset !== undefined) {
    if (typeof raw.agentPreset !== 'string') bad('agentPreset must be a string')
    header.agentPreset = raw.agentPreset
  }
  if (header.origin === 'subagent' && header.parentSession === undefined) bad("a session with origin 'subagent' needs a parentSession")
  return Object.freeze(header)
}

function bad(why: string): never {
  throw new SessionError('SESSION_INVALID_HEADER', `Invalid session header: ${why}.`)
}

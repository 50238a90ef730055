import { isAbsolute } from 'node:path'
import { ImportV0Error } from './errors.js'

/**
 * The v0 vocabulary as this package reads and writes it (from the harness's
 * public format description; no harness code). A v0 log's first line is the
 * header, every later line one event or one packed chunk row.
 */

/** The header line `{"type":"session","version":0,…}`, fields in the order the harness writes them. */
export interface V0Header {
  readonly id: string
  readonly createdAt: number
  readonly cwd?: string
  readonly parentSession?: string
  /** How many leading events were inherited (the exact cut); present iff the session is seeded. */
  readonly seedLength?: number
  readonly origin?: 'subagent'
  readonly delegationDepth: number
  readonly agentPreset?: string
}

/** One event line, as parsed (the object keeps whatever keys the line had, in their order). */
export interface V0Event {
  readonly type: string
  readonly seq: number
  readonly time: number
  readonly data: unknown
  readonly ignorable?: boolean
  readonly sourceEventSeqs?: readonly number[]
  readonly surfaceOp?: unknown
}

export const V0_FORMAT_VERSION = 0
const HEADER_KEYS = ['type', 'version', 'id', 'createdAt', 'cwd', 'parentSession', 'seedLength', 'origin', 'delegationDepth', 'agentPreset']

function bad(why: string): never {
  throw new ImportV0Error('IMPORT_V0_BAD_HEADER', `The first line is not a valid v0 session header: ${why}.`)
}

function nonNegativeInteger(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 && !Object.is(value, -0)
}

/** Parses and validates the header line (without its newline). */
export function parseHeaderLine(text: string): V0Header {
  let raw: unknown
  try {
    raw = JSON.parse(text)
  } catch {
    bad('it is not JSON')
  }
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) bad('it is not a JSON object')
  const line = raw as Record<string, unknown>
  if (line.type !== 'session') bad(`its type is ${JSON.stringify(line.type)}, not "session"`)
  if (line.version !== V0_FORMAT_VERSION) {
    throw new ImportV0Error(
      'IMPORT_V0_UNSUPPORTED_VERSION',
      `The header says version ${JSON.stringify(line.version)}; only version 0 logs can be imported (the harness itself refuses other versions).`,
    )
  }
  const unknown = Object.keys(line).find((key) => !HEADER_KEYS.includes(key))
  if (unknown !== undefined) bad(`it has the field "${unknown}", which v0 headers do not carry (it could not be kept)`)
  if (typeof line.id !== 'string' || line.id.length === 0) bad('id must be a non-empty string')
  if (!nonNegativeInteger(line.createdAt)) bad('createdAt must be a non-negative safe-integer epoch in milliseconds')
  if (!nonNegativeInteger(line.delegationDepth)) bad('delegationDepth must be a non-negative integer')
  if (line.cwd !== undefined && (typeof line.cwd !== 'string' || !isAbsolute(line.cwd))) bad('cwd must be an absolute path')
  if (line.parentSession !== undefined && (typeof line.parentSession !== 'string' || line.parentSession.length === 0)) {
    bad('parentSession must be a non-empty string')
  }
  if (line.seedLength !== undefined && !nonNegativeInteger(line.seedLength)) bad('seedLength must be a non-negative integer')
  if (line.origin !== undefined && line.origin !== 'subagent') bad('origin must be "subagent" when present')
  if (line.origin === 'subagent' && line.parentSession === undefined) bad('a subagent session needs a parentSession')
  if (line.agentPreset !== undefined && typeof line.agentPreset !== 'string') bad('agentPreset must be a string')
  const header: { -readonly [K in keyof V0Header]: V0Header[K] } = {
    id: line.id,
    createdAt: line.createdAt,
    delegationDepth: line.delegationDepth,
  }
  if (line.cwd !== undefined) header.cwd = line.cwd as string
  if (line.parentSession !== undefined) header.parentSession = line.parentSession as string
  if (line.seedLength !== undefined) header.seedLength = line.seedLength
  if (line.origin !== undefined) header.origin = 'subagent'
  if (line.agentPreset !== undefined) header.agentPreset = line.agentPreset as string
  return header
}

/** The header line's JSON text (no newline), fields in the harness's order, absent fields omitted. */
export function headerLineText(header: V0Header): string {
  return JSON.stringify({
    type: 'session',
    version: V0_FORMAT_VERSION,
    id: header.id,
    createdAt: header.createdAt,
    ...(header.cwd === undefined ? {} : { cwd: header.cwd }),
    ...(header.parentSession === undefined ? {} : { parentSession: header.parentSession }),
    ...(header.seedLength === undefined ? {} : { seedLength: header.seedLength }),
    ...(header.origin === undefined ? {} : { origin: header.origin }),
    delegationDepth: header.delegationDepth,
    ...(header.agentPreset === undefined ? {} : { agentPreset: header.agentPreset }),
  })
}

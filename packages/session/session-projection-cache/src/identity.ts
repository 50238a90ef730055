import { SESSION_HEADER_WITNESS_FIELDS, type SessionHeader } from '@dsh/session'

/**
 * The lifecycle witness of a checkpoint: every header witness field, in a
 * fixed order. Two headers with the same id but any other field different
 * belong to different lifecycles and never share a row. The exact cut is kept
 * beside it, in its own column. (No witness field may be `null`, so `null`
 * unambiguously stands for an absent optional field.)
 */
export function checkpointIdentity(header: SessionHeader): string {
  return JSON.stringify(SESSION_HEADER_WITNESS_FIELDS.map((field) => header[field] ?? null))
}

import { compareSessionIds, type SessionHeader } from '@dsh/session'

/** The listing order position of a record: `createdAt` ascending, then id. */
export interface RecordKey {
  readonly createdAt: number
  readonly id: string
}

export function compareKeys(a: RecordKey, b: RecordKey): number {
  return a.createdAt !== b.createdAt ? a.createdAt - b.createdAt : compareSessionIds(a.id, b.id)
}

export function recordKeyOf(header: SessionHeader): RecordKey {
  return { createdAt: header.createdAt, id: header.id }
}

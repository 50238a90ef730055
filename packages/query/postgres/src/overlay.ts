import type { SessionChangeCursor } from '@dsh/session-persistence'
import { queryError } from '@dsh/session-query/backend'

/**
 * What a read-only search adds to the text index: the sessions whose log goes
 * past their indexed text (candidates), their missing events as text rows
 * held in memory (the overlay), and the statement fragment that searches
 * those rows beside the index.
 */

/** Default of `overlayLimit`. */
export const OVERLAY_LIMIT = 1_000
/** Default of `overlayTextLimit`. */
export const OVERLAY_TEXT_LIMIT = 16 * 1024 * 1024

/** A session whose text the index lacks: its row, where its indexed text ends and where its log ends. */
export interface Candidate {
  id_key: Buffer
  sid: string
  id: Buffer
  indexed: number
  next_seq: number
}

/** The events a session's indexed text lacks, as text rows: read for one (sid, indexed, next_seq), reused while those hold. */
export interface OverlayEntry {
  readonly candidate: Candidate
  readonly seqs: number[]
  readonly types: string[]
  readonly bodies: string[]
  readonly units: number
}

/**
 * What a read-only search adds to the index: the text rows of every session
 * the index lacks text of, held in memory and brought up to date from the
 * change feed before each search (only sessions it names are read again).
 */
export class Overlay {
  readonly limit: number
  readonly textLimit: number
  cursor: SessionChangeCursor | undefined
  entries = new Map<string, OverlayEntry>()
  /** Settles when the last pass has; the next starts after it. */
  tail: Promise<void> = Promise.resolve()

  constructor(limit: number, textLimit: number) {
    this.limit = limit
    this.textLimit = textLimit
  }

  /** The overlay's rows as the search statements' array parameters ($4–$8). */
  parameters(): unknown[] {
    const keys: Buffer[] = []
    const sids: string[] = []
    const seqs: number[] = []
    const types: string[] = []
    const bodies: string[] = []
    for (const entry of this.entries.values()) {
      for (const [i, seq] of entry.seqs.entries()) {
        keys.push(entry.candidate.id_key)
        sids.push(entry.candidate.sid)
        seqs.push(seq)
        types.push(entry.types[i]!)
        bodies.push(entry.bodies[i]!)
      }
    }
    return [keys, sids, seqs, types, bodies]
  }
}

/** `SESSION_QUERY_INDEX_UNAVAILABLE` of a read-only search whose overlay would pass its bounds. */
export function overlayUnavailable(reason: string) {
  return queryError(
    'SESSION_QUERY_INDEX_UNAVAILABLE',
    `The PostgreSQL search index cannot answer a read-only search: ${reason} such a search reads from the logs. A host that writes sessions (dsh serve or dsh run on the store) indexes their text; search again after it has.`,
  )
}

/**
 * The text rows a search reads: the index, or the index and the overlay's
 * rows ($4–$8). The index is filtered by the query itself in its own branch
 * (so its GIN index answers it); an overlay row the index holds meanwhile (a
 * writer indexed it since) is left out, so no event is counted twice.
 */
export function textRows(overlay: boolean): string {
  if (!overlay) return 'dsh_event_text'
  return `(SELECT id_key, sid, seq, type, body, tsv FROM dsh_event_text WHERE tsv @@ plainto_tsquery('simple', $1)
     UNION ALL
     SELECT o.id_key, o.sid, o.seq, o.type, o.body, to_tsvector('simple', o.body)
     FROM unnest($4::bytea[], $5::bigint[], $6::integer[], $7::text[], $8::text[]) AS o(id_key, sid, seq, type, body)
     WHERE NOT EXISTS (SELECT 1 FROM dsh_event_text e WHERE e.id_key = o.id_key AND e.sid = o.sid AND e.seq = o.seq))`
}

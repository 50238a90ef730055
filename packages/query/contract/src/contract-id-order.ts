import { compareSessionIds, type SessionHeader, type SessionStore, type StoredSessionEvent } from '@dsh/session'
import type { SessionPersistence } from '@dsh/session-persistence'
import fc from 'fast-check'
import { expect, it } from 'vitest'
import type { SessionQuery } from './types.js'

/** What the id order contract needs from the suite that registers it. */
export interface IdOrderContract {
  /** A fresh persistence and live store (cleaned up by the suite). */
  env(): Promise<{ readonly persistence: SessionPersistence; readonly sessions: SessionStore }>
  /** Opens the backend under test over the corpus persisted so far. */
  openQuery(sources: { readonly sessions: SessionStore; readonly persistence: SessionPersistence }): Promise<SessionQuery> | SessionQuery
  header(id: string, createdAt: number): SessionHeader
  persist(persistence: SessionPersistence, header: SessionHeader, events: readonly StoredSessionEvent[]): Promise<void>
  messages(texts: readonly string[]): StoredSessionEvent[]
  /** Whether the backend searches: then equal-score hits must come in id order too. */
  readonly search: boolean
}

/**
 * Characters whose orders disagree: UTF-16 code units put U+10000.. (a
 * surrogate pair) before U+E000..U+FFFF, locale collations ignore case and
 * punctuation, byte order and code point order agree. U+0001 (a NUL is no
 * id: `idFault`), the last BMP character and the last code point are the
 * edges.
 */
const ID_UNITS = [
  '\u0001',
  ' ',
  '-',
  '.',
  '0',
  '9',
  'A',
  'Z',
  '_',
  'a',
  'z',
  '~',
  '\u00e9',
  '\u00ff',
  '\u07ff',
  '\u0800',
  '\ud7ff',
  '\ue000',
  '\uf8ff',
  '\ufb01',
  '\ufffd',
  '\uffff',
  '\u{10000}',
  '\u{1f600}',
  '\u{10ffff}',
]

/** The same inputs on every backend: a failure names the backend, the seed reproduces it anywhere. */
const ORDER_SEED = 0x1d0bde5
const ORDER_RUNS = 20
const T_ORDER = 1_800_000_000_000

/** A search word unique to one property run: letters only, so every tokenizer keeps it whole. */
function runWord(run: number): string {
  let word = ''
  for (let n = run; n > 0; n = Math.floor(n / 26)) word += String.fromCharCode(97 + (n % 26))
  return `tie${word}`
}

const idSets = fc.uniqueArray(fc.string({ unit: fc.constantFrom(...ID_UNITS), minLength: 1, maxLength: 5 }), {
  minLength: 2,
  maxLength: 9,
})

async function pages<T>(first: (cursor: string | undefined) => Promise<{ items: readonly T[]; next?: string | undefined }>): Promise<T[]> {
  const out: T[] = []
  let cursor: string | undefined
  for (let n = 0; n < 100; n++) {
    const page = await first(cursor)
    out.push(...page.items)
    cursor = page.next
    if (cursor === undefined) return out
  }
  throw new Error('paging did not end after 100 pages')
}

/**
 * Registers the id order contract: sessions created in the same millisecond
 * are listed by id in Unicode code point order (`compareSessionIds`), on a
 * whole listing and across keyset pages of any size, live and persisted
 * sessions mixed; equal-score search hits come in the same order, page by
 * page. Property-based, with a fixed seed: every backend orders the same
 * generated ids.
 */
export function idOrderContract(c: IdOrderContract): void {
  it('lists same-millisecond ids in code point order, whole and paged; equal-score search hits too (property)', async () => {
    const e = await c.env()
    let run = 0
    await fc.assert(
      fc.asyncProperty(idSets, fc.option(fc.nat()), fc.integer({ min: 1, max: 4 }), async (raw, liveAt, limit) => {
        run++
        const createdAt = T_ORDER + run
        const word = runWord(run)
        // A prefix of the run keeps ids apart across runs (shrinking included); within a run it is common to all.
        const ids = raw.map((id) => `${run}|${id}`)
        // At most one live session: an index backend fetches a page plus one row per live session, so
        // few live sessions leave the page's rows to the SQL order and its keyset condition.
        const live = liveAt === null ? undefined : ids[liveAt % ids.length]
        const persisted: string[] = []
        for (const id of ids) {
          if (id === live) {
            e.sessions.create({ id, createdAt })
          } else {
            await c.persist(e.persistence, c.header(id, createdAt), c.messages([word]))
            persisted.push(id)
          }
        }
        const expected = [...ids].sort(compareSessionIds)
        const query = await c.openQuery({ sessions: e.sessions, persistence: e.persistence })
        try {
          const filter = { createdAt: { from: createdAt, to: createdAt } }
          const whole = (await query.listSessions(filter)).records.map((r) => r.header.id)
          expect(whole, 'the whole listing').toEqual(expected)
          const paged = await pages(async (cursor) => {
            const page = await query.listSessions({ ...filter, limit, ...(cursor === undefined ? {} : { cursor }) })
            return { items: page.records.map((r) => r.header.id), next: page.nextCursor }
          })
          expect(paged, `pages of ${limit}`).toEqual(expected)
          if (!c.search || persisted.length === 0) return
          const tied = [...persisted].sort(compareSessionIds)
          const events = await pages(async (cursor) => {
            const page = await query.searchEvents!({ text: word, limit, ...(cursor === undefined ? {} : { cursor }) })
            return { items: page.hits.map((h) => h.id as string), next: page.nextCursor }
          })
          expect(events, `event hits in pages of ${limit}`).toEqual(tied)
          const sessions = await pages(async (cursor) => {
            const page = await query.searchSessions!({ text: word, limit, ...(cursor === undefined ? {} : { cursor }) })
            return { items: page.hits.map((h) => h.record.header.id), next: page.nextCursor }
          })
          expect(sessions, `session hits in pages of ${limit}`).toEqual(tied)
        } finally {
          await query.close?.()
          if (live !== undefined) await e.sessions.dispose(live)
        }
      }),
      {
        seed: ORDER_SEED,
        numRuns: ORDER_RUNS,
        examples: [
          [['a', 'B', 'a-', 'a.', '\ue000', '\uffff', '\u{10000}', '\u{1f600}', '\u00e9'], 5, 2],
          [['\u{10ffff}', '\ufffd', 'a\u0001', 'a'], null, 1],
        ],
      },
    )
  }, 600_000) // bounded by runs; the timeout only guards a hang
}

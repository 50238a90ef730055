import { join } from 'node:path'
import { compareSessionIds, SessionSeq } from '@dsh/session'
import { createMemoryPersistence } from '@dsh/session-persistence'
import type { EventSearchHit } from '@dsh/session-query'
import { describe, expect, it } from 'vitest'
import { code, header, message, openQuery, persist, store, tempDir } from './helpers.js'
import { countReads } from './read-counter.js'

async function setup() {
  const { persistence, reads: counted } = countReads(createMemoryPersistence())
  await persist(persistence, header('a', 1), [message(0, 'the otter swims'), message(1, 'an otter and another otter', 'assistant/message')])
  await persist(persistence, header('b', 2), [message(0, 'otter'), message(1, 'nothing to see')])
  await persist(persistence, header('c', 3), [
    {
      type: 'tool/call',
      seq: SessionSeq(0),
      time: 0,
      data: { turn: 1, callId: 'k', name: 'grep_files', arguments: { pattern: 'platypus', paths: ['/src'] } },
    },
    {
      type: 'tool/result',
      seq: SessionSeq(1),
      time: 0,
      data: { turn: 1, callId: 'k', content: [{ type: 'text', text: 'found platypus in zoo.ts' }] },
    },
    { type: 'assistant/chunk', seq: SessionSeq(2), time: 0, data: { turn: 1, index: 0, delta: 'wombat streaming' } },
    { type: 'subagent/descriptor', seq: SessionSeq(3), time: 0, data: { version: 2, mode: 'one-shot', provider: 'wombat' } },
  ])
  for (let i = 0; i < 9; i++) await persist(persistence, header(`many-${i}`, 10 + i), [message(0, `otter number ${i}`)])
  const { sessions } = store()
  const opened = await openQuery({ sessions, persistence, path: join(tempDir(), 'q.sqlite') })
  return { persistence, counted, sessions, ...opened }
}

function ordered(hits: readonly EventSearchHit[]): void {
  for (let i = 1; i < hits.length; i++) {
    const [p, h] = [hits[i - 1]!, hits[i]!]
    const cmp = p.score !== h.score ? h.score - p.score : compareSessionIds(p.id, h.id) || p.seq - h.seq
    expect(cmp, `${p.id}#${p.seq} before ${h.id}#${h.seq}`).toBeLessThan(0)
  }
}

describe('full-text search', () => {
  it('finds message, tool call and tool result text, with snippets, best first and deterministically ordered', async () => {
    const { query } = await setup()
    const otters = await query.searchEvents({ text: 'otter', limit: 100 })
    expect(otters.hits.map((h) => `${h.id}#${h.seq}`).sort()).toEqual(
      ['a#0', 'a#1', 'b#0', ...Array.from({ length: 9 }, (_, i) => `many-${i}#0`)].sort(),
    )
    ordered(otters.hits)
    expect(otters.hits.every((h) => h.snippet.includes('[otter]'))).toBe(true)
    expect(otters.hits.find((h) => h.id === 'a' && h.seq === 1)?.type).toBe('assistant/message')
    const tool = await query.searchEvents({ text: 'platypus' })
    expect(tool.hits.map((h) => [h.id, h.seq, h.type])).toEqual(
      expect.arrayContaining([
        ['c', 0, 'tool/call'],
        ['c', 1, 'tool/result'],
      ]),
    )
    expect((await query.searchEvents({ text: 'grep_files' })).hits.map((h) => h.seq)).toEqual([0])
    // Streaming chunks and domain events are not indexed.
    expect((await query.searchEvents({ text: 'wombat' })).hits).toEqual([])
    // Several words: all are required.
    expect((await query.searchEvents({ text: 'OTTER swims' })).hits.map((h) => `${h.id}#${h.seq}`)).toEqual(['a#0'])
    // FTS syntax in the text is just words.
    expect((await query.searchEvents({ text: 'otter" OR NOT "x* NEAR(' })).hits).toEqual([])
  })

  it('ranks sessions by their best event and counts their matching events', async () => {
    const { query } = await setup()
    const page = await query.searchSessions({ text: 'otter', limit: 100 })
    expect(page.hits.map((h) => h.record.header.id).sort()).toEqual(['a', 'b', ...Array.from({ length: 9 }, (_, i) => `many-${i}`)].sort())
    expect(page.hits.find((h) => h.record.header.id === 'a')?.matches).toBe(2)
    expect(page.hits.find((h) => h.record.header.id === 'b')).toMatchObject({ matches: 1, record: { live: false, persisted: true } })
    for (let i = 1; i < page.hits.length; i++) {
      const [p, h] = [page.hits[i - 1]!, page.hits[i]!]
      expect(p.score > h.score || (p.score === h.score && compareSessionIds(p.record.header.id, h.record.header.id) < 0)).toBe(true)
    }
  })

  it('pages with cursors that concatenate to the whole result', async () => {
    const { query } = await setup()
    for (const kind of ['searchEvents', 'searchSessions'] as const) {
      const whole = (await query[kind]({ text: 'otter', limit: 100 })).hits
      const paged: unknown[] = []
      let cursor: string | undefined
      do {
        const page: { hits: readonly unknown[]; nextCursor?: string } = await query[kind]({
          text: 'otter',
          limit: 5,
          ...(cursor === undefined ? {} : { cursor }),
        })
        paged.push(...page.hits)
        cursor = page.nextCursor
      } while (cursor !== undefined)
      expect(paged).toEqual(whole)
    }
  })

  it('rejects a cursor of a stale index generation with SESSION_QUERY_STALE_CURSOR', async () => {
    const { query, persistence, sessions } = await setup()
    const first = await query.searchEvents({ text: 'otter', limit: 3 })
    expect(first.nextCursor).toBeDefined()
    await persist(persistence, header('b', 2), [message(2, 'a late otter')])
    await query.reconcile()
    expect(await code(query.searchEvents({ text: 'otter', limit: 3, cursor: first.nextCursor! }))).toBe('SESSION_QUERY_STALE_CURSOR')
    // A fresh first page works, and so does its cursor until the next change.
    const fresh = await query.searchEvents({ text: 'otter', limit: 3 })
    expect((await query.searchEvents({ text: 'otter', limit: 3, cursor: fresh.nextCursor! })).hits).toHaveLength(3)
    // Text appended to a live session changes the index too.
    const live = sessions.create({ id: 'live' })
    live.append('user/message', { text: 'live otter' })
    expect(await code(query.searchEvents({ text: 'otter', limit: 3, cursor: fresh.nextCursor! }))).toBe('SESSION_QUERY_STALE_CURSOR')
  })

  it('rejects malformed requests and cursors from another search with typed errors', async () => {
    const { query } = await setup()
    const page = await query.searchEvents({ text: 'otter', limit: 2 })
    for (const bad of [
      { text: '' },
      { text: '  !!! ' },
      { text: 5 },
      {},
      { text: 'x', limit: 0 },
      { text: 'x', limit: 101 },
      { text: 'x', extra: 1 },
      null,
      'otter',
      { text: 'x'.repeat(1001) },
    ]) {
      expect(await code(query.searchEvents(bad as never)), JSON.stringify(bad)).toBe('SESSION_QUERY_INVALID_FILTER')
    }
    expect(await code(query.searchEvents({ text: 'swims', cursor: page.nextCursor! }))).toBe('SESSION_QUERY_INVALID_CURSOR')
    expect(await code(query.searchSessions({ text: 'otter', cursor: page.nextCursor! }))).toBe('SESSION_QUERY_INVALID_CURSOR')
    expect(await code(query.searchEvents({ text: 'otter', cursor: 'bm90IGEgY3Vyc29y' }))).toBe('SESSION_QUERY_INVALID_CURSOR')
    const listing = await query.listSessions({ limit: 1 })
    expect(await code(query.searchEvents({ text: 'otter', cursor: listing.nextCursor! }))).toBe('SESSION_QUERY_INVALID_CURSOR')
    expect(await code(query.searchEvents({ text: 'otter' }, AbortSignal.abort()))).toBe('CANCELLED')
  })

  it('searches live sessions from memory, with live records', async () => {
    const { query, sessions, counted } = await setup()
    const live = sessions.create({ id: 'hot', createdAt: 99 })
    live.append('user/message', { text: 'a capybara appears' })
    const reads = counted.logs
    const first = await query.searchSessions({ text: 'capybara' })
    expect(first.hits.map((h) => h.record)).toEqual([expect.objectContaining({ live: true, persisted: false })])
    live.append('assistant/message', { turn: 1, text: 'the capybara again, and an otter' })
    expect((await query.searchEvents({ text: 'capybara' })).hits.map((h) => h.seq).sort()).toEqual([0, 1])
    expect((await query.searchEvents({ text: 'otter capybara' })).hits.map((h) => `${h.id}#${h.seq}`)).toEqual(['hot#1'])
    expect(counted.logs).toBe(reads)
  })
})

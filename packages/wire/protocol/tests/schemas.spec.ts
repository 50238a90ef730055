import { describe, expect, it } from 'vitest'
import {
  errorBody,
  historyPage,
  searchPage,
  sessionHeader,
  sessionListPage,
  storedEvent,
  streamEvent,
  subagentList,
  subagentListEntry,
} from '../src/index.js'

const header = {
  version: 1,
  id: 'child-1',
  createdAt: 1_700_000_000_000,
  parentSession: 'parent',
  isSeeded: false,
  delegationDepth: 1,
  origin: 'subagent',
}

describe('response schemas', () => {
  it('accept the documented shapes', () => {
    expect(
      sessionListPage.parse({
        sessions: [{ header, inheritedEventCount: 0, live: true, persisted: false, title: 'Plan the release', tokens: 12, cost: null }],
        nextCursor: 'c',
      }).sessions,
    ).toHaveLength(1)
    const page = historyPage.parse({
      header,
      inheritedEventCount: 0,
      events: [{ type: 'user/message', seq: 0, time: 1, data: { text: 'hi', nested: [1, null, { ok: true }] } }],
      total: 1,
    })
    expect(page.events[0]?.type).toBe('user/message')
    const rows = [
      { kind: 'child', id: 'a', activity: 'running', hasChildren: false, mode: 'one-shot', parentId: 'p', depth: 1, rung: 1 },
      {
        kind: 'child',
        id: 'b',
        activity: 'inactive',
        hasChildren: true,
        mode: 'continuable',
        label: 'helper',
        parentId: 'p',
        depth: 1,
        rung: 3,
      },
      { kind: 'diagnostic', id: 'c', reason: 'corrupt', parentId: 'b', depth: 2, rung: 3 },
    ]
    expect(subagentList.parse({ parentId: 'p', scope: 'descendants', rows }).rows).toEqual(rows)
    expect(
      searchPage.parse({
        kind: 'events',
        hits: [{ id: 'a', seq: 2, type: 'assistant/message', snippet: '…[x]…', marks: [[1, 4]], score: 1.5 }],
      }).kind,
    ).toBe('events')
    expect(streamEvent.parse({ event: 'catalog', data: { sessionId: 'p', parentId: 'p', childId: 'a', reason: 'disposed' } }).event).toBe(
      'catalog',
    )
  })

  it('refuse what the contract rules out', () => {
    // A continuable child always has a label.
    expect(
      subagentListEntry.safeParse({ kind: 'child', id: 'b', activity: 'inactive', hasChildren: false, mode: 'continuable' }).success,
    ).toBe(false)
    expect(subagentListEntry.safeParse({ kind: 'diagnostic', id: 'c', reason: 'gone' }).success).toBe(false)
    expect(sessionHeader.safeParse({ ...header, version: 2 }).success).toBe(false)
    expect(sessionHeader.safeParse({ ...header, createdAt: -1 }).success).toBe(false)
    expect(sessionHeader.safeParse({ ...header, origin: 'fork' }).success).toBe(false)
    expect(storedEvent.safeParse({ type: 'x', seq: 1.5, time: 0, data: null }).success).toBe(false)
    expect(errorBody.safeParse({ code: '', message: 'x' }).success).toBe(false)
  })

  it('pass event data and projection views on as they are: an own __proto__ key (legal JSON) is kept', () => {
    const data = JSON.parse('{"__proto__":0,"nested":[{"__proto__":{"x":1}}]}') as unknown
    const parsed = storedEvent.parse({ type: 'x', seq: 0, time: 0, data })
    expect(JSON.stringify(parsed.data)).toBe('{"__proto__":0,"nested":[{"__proto__":{"x":1}}]}')
    const view = streamEvent.parse({ event: 'projection', data: { sessionId: 's', key: 'k', seq: 0, view: data } })
    expect(JSON.stringify(view.event === 'projection' && view.data.view)).toBe(JSON.stringify(data))
    // Still JSON only.
    for (const bad of [Number.NaN, new Date(0), { a: undefined }, [() => 1]])
      expect(storedEvent.safeParse({ type: 'x', seq: 0, time: 0, data: bad }).success).toBe(false)
  })

  it('strip fields a backend carries internally, so they never reach the wire', () => {
    expect(sessionHeader.parse({ ...header, internalPath: '/srv/dsh/child-1' })).not.toHaveProperty('internalPath')
  })
})

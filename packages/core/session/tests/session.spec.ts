import { Context } from '@dsh/context'
import { describe, expect, it } from 'vitest'
import { parseSessionHeader, type Session, type SessionEvent, SessionSeq, SessionStore, sameLifecycle } from '../src/index.js'

function store(): { ctx: Context; sessions: SessionStore; errors: unknown[] } {
  const errors: unknown[] = []
  const ctx = new Context({ logger: { warn: () => {}, error: (_m, e) => void errors.push(e) } })
  let n = 0
  const sessions = new SessionStore(ctx, { clock: () => 1_700_000_000_000 + n, newId: () => `s${++n}` })
  ctx.provide('sessions', sessions)
  return { ctx, sessions, errors }
}

function turn(session: Session, turnNo: number, text: string): void {
  session.append('turn/start', { turn: turnNo })
  session.append('assistant/message', { turn: turnNo, text })
  session.append('turn/end', { turn: turnNo, reason: 'completed' })
}

describe('Session', () => {
  it('keeps seq === index and exposes the next offset', () => {
    const { sessions } = store()
    const s = sessions.create()
    turn(s, 1, 'a')
    expect(s.events.map((e) => e.seq)).toEqual([0, 1, 2])
    expect(s.seq).toBe(3)
    expect(s.eventAt(1)?.type).toBe('assistant/message')
    expect(s.eventAt(3)).toBeUndefined()
    expect(s.eventAt(-1)).toBeUndefined()
  })

  it('freezes events and snapshots; an earlier snapshot never grows', () => {
    const { sessions } = store()
    const s = sessions.create()
    const data = { text: 'hi' }
    const event = s.append('user/message', data)
    const before = s.events
    s.append('user/message', { text: 'again' })
    expect(before).toHaveLength(1)
    expect(s.events).toHaveLength(2)
    expect(Object.isFrozen(before)).toBe(true)
    expect(Object.isFrozen(event)).toBe(true)
    expect(Object.isFrozen(event.data)).toBe(true)
    expect(() => (before as SessionEvent[]).push(event)).toThrow()
    // The caller's object is copied, not frozen in place.
    expect(Object.isFrozen(data)).toBe(false)
    data.text = 'changed'
    expect(s.eventAt(0)?.data).toEqual({ text: 'hi' })
    const nested = s.append('tool/call', { turn: 1, callId: 'c', name: 'x', arguments: { deep: [1, { a: 2 }] } })
    expect(Object.isFrozen((nested.data.arguments as { deep: unknown[] }).deep[1])).toBe(true)
  })

  it.each([
    ['NaN', { text: 'x', n: Number.NaN }],
    ['-0', { text: 'x', n: -0 }],
    ['undefined', { text: 'x', n: undefined }],
    ['a Date', { text: 'x', when: new Date(0) }],
    [
      'a class instance',
      {
        text: 'x',
        v: new (class Point {
          x = 1
        })(),
      },
    ],
    ['Infinity', { text: 'x', n: Number.POSITIVE_INFINITY }],
    ['a function', { text: 'x', f: () => 1 }],
    ['a bigint', { text: 'x', b: 1n }],
    ['a Map', { text: 'x', m: new Map() }],
  ])('rejects event data with %s and appends nothing', (_name, data) => {
    const { sessions } = store()
    const s = sessions.create()
    expect(() => s.append('user/message', data as never)).toThrowError(expect.objectContaining({ code: 'SESSION_INVALID_EVENT' }))
    expect(s.seq).toBe(0)
  })

  it('rejects a cycle with a typed error and appends nothing', () => {
    const { sessions } = store()
    const s = sessions.create()
    const cyclic: Record<string, unknown> = { text: 'x' }
    cyclic.self = cyclic
    expect(() => s.append('user/message', cyclic as never)).toThrowError(expect.objectContaining({ code: 'SESSION_INVALID_EVENT' }))
    expect(s.events).toHaveLength(0)
    // Shared (non-cyclic) references are fine.
    const shared = { a: 1 }
    s.append('tool/result', { turn: 1, callId: 'c', content: { x: shared, y: shared } })
    expect(s.seq).toBe(1)
  })

  it('isOwnSeq and ownEvents follow the exact cut, including own setup events inside the seed', () => {
    const { sessions } = store()
    const parent = sessions.create()
    turn(parent, 1, 'a') // 0..2
    turn(parent, 2, 'b') // 3..5
    const setup = { type: 'user/message', seq: SessionSeq(3), time: 1, data: { text: 'child setup' } }
    const child = sessions.create({ seed: [...parent.events.slice(0, 3), setup], inheritedEventCount: 3, parentSession: parent.id })
    expect(child.header.isSeeded).toBe(true)
    expect(child.inheritedEventCount).toBe(3)
    expect(child.ownEvents().map((e) => e.seq)).toEqual([3])
    child.append('user/message', { text: 'own' })
    expect(child.ownEvents().map((e) => e.seq)).toEqual([3, 4])
    expect([0, 1, 2].map((q) => child.isOwnSeq(q))).toEqual([false, false, false])
    expect([3, 4].map((q) => child.isOwnSeq(q))).toEqual([true, true])
    expect([5, -1, 3.5, -0, Number.NaN].map((q) => child.isOwnSeq(q))).toEqual([false, false, false, false, false])
  })

  it('requires an explicit inheritedEventCount with a seed and refuses one beyond it', () => {
    const { sessions } = store()
    const parent = sessions.create()
    turn(parent, 1, 'a')
    expect(() => sessions.create({ seed: parent.events })).toThrowError(expect.objectContaining({ code: 'SESSION_INVALID_SEED' }))
    expect(() => sessions.create({ seed: parent.events, inheritedEventCount: 4 })).toThrowError(
      expect.objectContaining({ code: 'SESSION_INVALID_SEED' }),
    )
    const bad = [{ ...parent.events[0]!, seq: 5 }]
    expect(() => sessions.create({ seed: bad as never, inheritedEventCount: 0 })).toThrowError(
      expect.objectContaining({ code: 'SESSION_INVALID_SEED' }),
    )
  })

  it('numbers the next turn one above the highest started, inherited turns included', () => {
    const { sessions } = store()
    const s = sessions.create()
    expect(s.nextTurn()).toBe(1)
    turn(s, 1, 'a')
    expect(s.nextTurn()).toBe(2)
    // A turn numbered out of order, and one left open, still count; other events' turn fields do not.
    s.append('turn/start', { turn: 5 })
    s.append('assistant/message', { turn: 9, text: 'b' })
    expect(s.nextTurn()).toBe(6)
    s.append('turn/end', { turn: 5, reason: 'completed' })
    const child = sessions.fork(s, { childId: 'kid' })
    expect(child.nextTurn()).toBe(6)
  })

  it('rejects an append from inside a listener, while the original append and other listeners succeed', () => {
    const { ctx, sessions, errors } = store()
    const seen: number[] = []
    ctx.on('session/event', (session) => {
      session.append('user/message', { text: 'reentrant' })
    })
    ctx.on('session/event', () => {
      throw new Error('listener bug')
    })
    ctx.on('session/event', (_s, event) => void seen.push(event.seq))
    const s = sessions.create()
    s.append('user/message', { text: 'one' })
    s.append('user/message', { text: 'two' })
    expect(s.seq).toBe(2)
    expect(seen).toEqual([0, 1])
    expect(errors.map((e) => (e as { code?: string }).code ?? (e as Error).message)).toEqual([
      'SESSION_REENTRANT_APPEND',
      'listener bug',
      'SESSION_REENTRANT_APPEND',
      'listener bug',
    ])
  })
})

describe('fork', () => {
  it('refuses a cut inside an open turn and accepts cuts at turn boundaries', () => {
    const { sessions } = store()
    const s = sessions.create()
    turn(s, 1, 'a')
    s.append('turn/start', { turn: 2 })
    s.append('assistant/chunk', { turn: 2, index: 0, delta: 'x' })
    expect(() => sessions.fork(s)).toThrowError(expect.objectContaining({ code: 'SESSION_FORK_OPEN_TURN' }))
    expect(() => sessions.fork(s, { boundary: 4 })).toThrowError(expect.objectContaining({ code: 'SESSION_FORK_OPEN_TURN' }))
    expect(() => sessions.fork(s, { boundary: 6 })).toThrowError(expect.objectContaining({ code: 'SESSION_FORK_OUT_OF_RANGE' }))
    const child = sessions.fork(s, { boundary: 3, childId: 'kid' })
    expect(child.id).toBe('kid')
    expect(child.header.parentSession).toBe(s.id)
    expect(child.header.isSeeded).toBe(true)
    expect(child.inheritedEventCount).toBe(3)
    expect(child.events).toEqual(s.events.slice(0, 3))
    expect(child.ownEvents()).toEqual([])
    expect(child.forkSource).toBe(s.id)
  })

  it('names the fork source only for a fork with an inherited prefix', async () => {
    const { sessions } = store()
    const s = sessions.create()
    turn(s, 1, 'a')
    expect(sessions.fork(s, { boundary: 0 }).forkSource).toBeUndefined()
    expect(sessions.create().forkSource).toBeUndefined()
    expect(sessions.create({ seed: s.events, inheritedEventCount: 3 }).forkSource).toBeUndefined()
    expect(sessions.create({ seed: s.events, inheritedEventCount: 3, forkSource: s.id }).forkSource).toBe(s.id)
    expect(() => sessions.create({ seed: s.events, inheritedEventCount: 3, forkSource: '' })).toThrow()
    await sessions.dispose(s.id)
    expect(sessions.restore({ header: s.header, inheritedEventCount: 0, events: s.events }).forkSource).toBeUndefined()
  })
})

describe('SessionStore', () => {
  it('emits lifecycle events, flushes through listeners and disposes', async () => {
    const { ctx, sessions } = store()
    const log: string[] = []
    ctx.on('session/created', (s, info) => void log.push(`created ${s.id} restored=${info.restored}`))
    ctx.on('session/flush', async (s) => void log.push(`flush ${s.id}`))
    ctx.on('session/disposed', (s) => void log.push(`disposed ${s.id}`))
    const s = sessions.create()
    expect(sessions.get(s.id)).toBe(s)
    expect(sessions.list()).toEqual([s])
    await sessions.dispose(s.id)
    expect(sessions.get(s.id)).toBeUndefined()
    expect(() => s.append('user/message', { text: 'late' })).toThrowError(expect.objectContaining({ code: 'SESSION_DISPOSED' }))
    const back = sessions.restore({ header: s.header, inheritedEventCount: 0, events: s.events })
    expect(back).not.toBe(s)
    expect(log).toEqual([`created ${s.id} restored=false`, `flush ${s.id}`, `disposed ${s.id}`, `created ${s.id} restored=true`])
    expect(() => sessions.create({ id: s.id })).toThrowError(expect.objectContaining({ code: 'SESSION_ALREADY_EXISTS' }))
  })

  it('flush rejects with SESSION_FLUSH_FAILED when persistence fails, and dispose keeps the session live', async () => {
    const { ctx, sessions } = store()
    ctx.on('session/flush', async () => {
      throw new Error('disk full')
    })
    const s = sessions.create()
    await expect(sessions.flush(s)).rejects.toMatchObject({ code: 'SESSION_FLUSH_FAILED' })
    await expect(sessions.dispose(s.id)).rejects.toMatchObject({ code: 'SESSION_FLUSH_FAILED' })
    expect(sessions.get(s.id)).toBe(s)
  })

  it('refuses at creation an id no store would take, so no session keeps its events only in memory', () => {
    const { ctx, sessions } = store()
    const created: string[] = []
    ctx.on('session/created', (s) => void created.push(s.id))
    for (const id of ['..', '.', 'x\u0000y', '\ud800', 'a'.repeat(1025)]) {
      expect(() => sessions.create({ id }), JSON.stringify(id)).toThrowError(expect.objectContaining({ code: 'SESSION_INVALID_HEADER' }))
    }
    expect(() => sessions.create({ id: '..' })).toThrowError(/id is a dot segment/)
    expect(sessions.list()).toEqual([])
    expect(sessions.create({ id: 'a/b' }).id).toBe('a/b')
    expect(created).toEqual(['a/b'])
  })
})

describe('SessionHeader', () => {
  it('validates untrusted headers and compares lifecycles over every witness field', () => {
    const base = { version: 1, id: 'x', createdAt: 5, isSeeded: false, delegationDepth: 0 }
    const header = parseSessionHeader(base)
    expect(Object.isFrozen(header)).toBe(true)
    for (const bad of [
      { ...base, version: 2 },
      { ...base, id: '' },
      { ...base, id: '..' },
      { ...base, createdAt: 1.5 },
      { ...base, isSeeded: 'no' },
      { ...base, delegationDepth: -1 },
      { ...base, cwd: 'relative/path' },
      { ...base, origin: 'other' },
      { ...base, origin: 'subagent' },
    ]) {
      expect(() => parseSessionHeader(bad), JSON.stringify(bad)).toThrowError(expect.objectContaining({ code: 'SESSION_INVALID_HEADER' }))
    }
    expect(sameLifecycle(header, parseSessionHeader({ ...base }))).toBe(true)
    expect(sameLifecycle(header, parseSessionHeader({ ...base, createdAt: 6 }))).toBe(false)
    expect(sameLifecycle(header, parseSessionHeader({ ...base, cwd: '/tmp' }))).toBe(false)
  })
})

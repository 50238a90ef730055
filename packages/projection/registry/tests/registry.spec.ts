import { Session, type SessionEvent } from '@dsh/session'
import { describe, expect, it } from 'vitest'
import { type ProjectionChange, SessionProjectionError } from '../src/index.js'
import { harness } from './helpers.js'
import { countUnit, expected, fragileUnit, lastTextUnit, pickyUnit } from './units.js'

describe('watermark cells on a live session', () => {
  it('100,000 events: apply once per event per unit, zero log reads and zero refolds on snapshot', () => {
    const { sessions, registry } = harness()
    registry.register(countUnit)
    registry.register(lastTextUnit)
    const session = sessions.create()
    // Count every read of the session's in-memory log, through either door.
    let eventAtCalls = 0
    let eventsCalls = 0
    const eventAt = session.eventAt.bind(session)
    session.eventAt = (seq: number) => {
      eventAtCalls++
      return eventAt(seq)
    }
    const eventsGetter = Object.getOwnPropertyDescriptor(Session.prototype, 'events')!.get!
    Object.defineProperty(session, 'events', {
      get: () => {
        eventsCalls++
        return eventsGetter.call(session)
      },
    })

    const total = 100_000
    for (let i = 0; i < total; i++) {
      if (i % 10 === 0) session.append('user/message', { text: `m${i}` })
      else session.append('assistant/chunk', { turn: 1, index: i, delta: 'x' })
    }
    expect(registry.metrics.applies).toBe(2 * total)
    const views = registry.metrics.views
    for (let i = 0; i < 5; i++) {
      expect(registry.snapshot(session)).toEqual({ count: total, lastText: `m${total - 10}` })
      expect(registry.snapshot(session, ['lastText'])).toEqual({ lastText: `m${total - 10}` })
    }
    expect(registry.metrics).toMatchObject({ applies: 2 * total, lazyFolds: 0, logReads: 0, failures: 0 })
    // Each unit's current state is viewed once, however many snapshots ask.
    expect(registry.metrics.views - views).toBe(2)
    expect(eventAtCalls).toBe(0)
    expect(eventsCalls).toBe(0)
  })

  it('builds a cell exactly when the first event it sees is not seq 0 (registered late, restored, forked)', () => {
    const { sessions, registry } = harness()
    const early = sessions.create()
    for (let i = 0; i < 10; i++) early.append('user/message', { text: `e${i}` })
    const restored = sessions.restore({
      header: { version: 1, id: 'r1' as never, createdAt: 1, isSeeded: false, delegationDepth: 0 },
      inheritedEventCount: 0,
      events: [0, 1, 2].map((seq) => ({ type: 'user/message', seq: seq as never, time: 1, data: { text: `r${seq}` } })),
    })
    registry.register(countUnit)
    registry.register(lastTextUnit)
    expect(registry.metrics.applies).toBe(0)

    early.append('assistant/message', { turn: 1, text: 'late' })
    expect(registry.metrics.lazyFolds).toBe(2)
    expect(registry.metrics.logReads).toBe(20) // the 10 old events, once per unit
    expect(registry.snapshot(early)).toEqual(expected(early.events, ['count', 'lastText']))

    restored.append('user/message', { text: 'after restore' })
    expect(registry.snapshot(restored)).toEqual({ count: 4, lastText: 'after restore' })

    const child = sessions.fork(early)
    child.append('user/message', { text: 'child' })
    expect(registry.snapshot(child)).toEqual({ count: 12, lastText: 'child' })
    expect(registry.snapshot(early)).toEqual({ count: 11, lastText: 'e9' })
    const applies = registry.metrics.applies
    early.append('user/message', { text: 'live again' })
    expect(registry.metrics.applies - applies).toBe(2)
  })

  it('folds a session outside any store lazily from its in-memory log, and catches up incrementally', () => {
    const { registry } = harness()
    registry.register(countUnit)
    const session = new Session({ header: { version: 1, id: 'loose' as never, createdAt: 1, isSeeded: false, delegationDepth: 0 } })
    expect(registry.snapshot(session)).toEqual({ count: 0 })
    session.append('user/message', { text: 'a' })
    session.append('user/message', { text: 'b' })
    expect(registry.snapshot(session)).toEqual({ count: 2 })
    session.append('user/message', { text: 'c' })
    expect(registry.snapshot(session)).toEqual({ count: 3 })
    expect(registry.metrics.applies).toBe(3)
    expect(registry.metrics.logReads).toBe(3)
  })

  it('drops cells on session/disposed and hands the final rows to cold listeners first', async () => {
    const { sessions, registry } = harness()
    registry.register(countUnit)
    const seen: unknown[] = []
    registry.onSessionCold(async (session, rows) => {
      await new Promise((resolve) => setTimeout(resolve, 5))
      seen.push([session.id, rows])
    })
    const session = sessions.create()
    session.append('user/message', { text: 'a' })
    session.append('user/message', { text: 'b' })
    await sessions.dispose(session.id)
    // store.dispose awaited the cold listener.
    expect(seen).toEqual([[session.id, { count: { stateVersion: 1, seq: 1, state: { n: 2 } } }]])
    const lazy = registry.metrics.lazyFolds
    expect(registry.snapshot(session)).toEqual({ count: 2 })
    expect(registry.metrics.lazyFolds).toBe(lazy + 1) // the old cell was gone: rebuilt from the log
  })
})

describe('failure isolation', () => {
  it('a unit that throws on one event type leaves the other units correct for that session and every later event', () => {
    const { sessions, registry, warnings } = harness()
    for (const unit of [countUnit, lastTextUnit, fragileUnit]) registry.register(unit)
    const broken = sessions.create()
    const healthy = sessions.create()
    broken.append('user/message', { text: 'one' })
    expect(registry.snapshot(broken)).toEqual({ count: 1, lastText: 'one', fragile: 1 })
    broken.append('tool/call', { turn: 1, callId: 'c1', name: 'ls', arguments: {} })
    healthy.append('user/message', { text: 'fine' })
    for (let i = 0; i < 50; i++) {
      broken.append(i % 2 === 0 ? 'user/message' : 'assistant/chunk', i % 2 === 0 ? { text: `t${i}` } : { turn: 1, index: i, delta: 'd' })
      const snap = registry.snapshot(broken)
      expect(snap).toEqual(expected(broken.events))
      expect('fragile' in snap).toBe(false)
    }
    expect(registry.snapshot(healthy)).toEqual({ count: 1, lastText: 'fine', fragile: 1 })
    expect(registry.metrics.failures).toBe(1)
    expect(warnings).toHaveLength(1)
    expect(warnings[0]).toMatch(/'fragile' threw on event 1 \('tool\/call'\)/)
    // The failure is checkpointed as such, and a detached fold agrees.
    expect(registry.checkpoint(broken, ['fragile'])).toEqual({ fragile: { stateVersion: 1, seq: 51, state: null, failed: true } })
    expect(registry.viewCheckpoint(registry.checkpoint(broken))).toEqual(registry.snapshot(broken))
    expect(registry.fold(broken.events, { inheritedEventCount: 0 as never })).toEqual(registry.snapshot(broken))
  })

  it('a unit that throws in init is absent for that session; a view that throws hides only that state', () => {
    const { sessions, registry } = harness()
    registry.register(pickyUnit)
    let calls = 0
    registry.register({
      ...countUnit,
      init: () => {
        calls++
        throw new Error('no init')
      },
    })
    const session = sessions.create()
    session.append('user/message', { text: 'a' })
    expect(registry.snapshot(session)).toEqual({})
    session.append('user/message', { text: 'b' })
    expect(registry.snapshot(session)).toEqual({ picky: 2 })
    expect(calls).toBe(1)
  })

  it('init is told the cut (live, fork, fold); a unit that throws in init for forks only is absent for forks only', () => {
    const { sessions, registry, warnings } = harness()
    const cuts: number[] = []
    registry.register({
      ...countUnit,
      init: (context) => {
        cuts.push(context?.inheritedEventCount ?? -1)
        if ((context?.inheritedEventCount ?? 0) > 0) throw new Error('no forks')
        return { n: 0 }
      },
    })
    registry.register(lastTextUnit)
    const parent = sessions.create()
    parent.append('user/message', { text: 'a' })
    parent.append('user/message', { text: 'b' })
    const child = sessions.fork(parent)
    child.append('user/message', { text: 'c' })
    parent.append('user/message', { text: 'd' })
    expect(registry.snapshot(parent)).toEqual({ count: 3, lastText: 'd' })
    expect(registry.snapshot(child)).toEqual({ lastText: 'c' })
    expect(cuts).toEqual([0, 2])
    expect(registry.checkpoint(child, ['count'])).toEqual({ count: { stateVersion: 1, seq: 2, state: null, failed: true } })
    expect(registry.viewCheckpoint(registry.checkpoint(child))).toEqual({ lastText: 'c' })
    expect(registry.fold(child.events, { inheritedEventCount: 2 as never })).toEqual({ lastText: 'c' })
    expect(registry.fold(child.events, { inheritedEventCount: 0 as never })).toEqual({ count: 3, lastText: 'c' })
    expect(cuts).toEqual([0, 2, 2, 0])
    expect(warnings).toEqual([expect.stringMatching(/'count' threw in init\(\) for session 's2'/)])
  })

  it('a throwing onChanged listener does not stop the others or the fold', () => {
    const { sessions, registry, errors } = harness()
    registry.register(countUnit)
    const seen: number[] = []
    registry.onChanged(() => {
      throw new Error('listener bug')
    })
    registry.onChanged((change) => void seen.push(change.seq))
    const session = sessions.create()
    session.append('user/message', { text: 'a' })
    session.append('user/message', { text: 'b' })
    expect(seen).toEqual([0, 1])
    expect(errors).toHaveLength(2)
    expect(registry.snapshot(session)).toEqual({ count: 2 })
  })
})

describe('register', () => {
  it('shares one unit and one cell set for the same key and stateVersion, reference-counted', () => {
    const { sessions, registry } = harness()
    const first = registry.register(countUnit)
    const second = registry.register({ ...countUnit, apply: (state) => ({ n: state.n + 100 }) })
    expect(registry.keys()).toEqual(['count'])
    const session = sessions.create()
    session.append('user/message', { text: 'a' })
    expect(registry.metrics.applies).toBe(1) // one cell, not two
    expect(registry.snapshot(session)).toEqual({ count: 1 }) // the first unit is the one in use
    first()
    first() // idempotent: must not release the second registration
    expect(registry.keys()).toEqual(['count'])
    session.append('user/message', { text: 'b' })
    expect(registry.snapshot(session)).toEqual({ count: 2 })
    expect(registry.metrics.lazyFolds).toBe(0)
    second()
    expect(registry.keys()).toEqual([])
    expect(() => registry.snapshot(session, ['count'])).toThrow(expect.objectContaining({ code: 'SESSION_PROJECTION_UNKNOWN_KEY' }))
    // A new registration starts a new cell set, built lazily from the log.
    registry.register(countUnit)
    expect(registry.snapshot(session)).toEqual({ count: 2 })
    expect(registry.metrics.lazyFolds).toBe(1)
  })

  it('refuses the same key with another stateVersion with a typed error', () => {
    const { registry } = harness()
    registry.register(countUnit)
    let caught: unknown
    try {
      registry.register({ ...countUnit, stateVersion: 2 })
    } catch (error) {
      caught = error
    }
    expect(caught).toBeInstanceOf(SessionProjectionError)
    expect(caught).toMatchObject({ code: 'SESSION_PROJECTION_VERSION_CONFLICT', details: { key: 'count', registered: 1, requested: 2 } })
    expect(registry.stateVersionOf('count')).toBe(1)
  })

  it.each([
    ['not an object', null],
    ['an empty key', { ...countUnit, key: '' }],
    ['a fractional stateVersion', { ...countUnit, stateVersion: 1.5 }],
    ['a negative stateVersion', { ...countUnit, stateVersion: -1 }],
    ['no apply', { ...countUnit, apply: undefined }],
    ['no schema', { ...countUnit, schema: undefined }],
  ])('rejects a unit with %s', (_why, unit) => {
    const { registry } = harness()
    expect(() => registry.register(unit as never)).toThrow(expect.objectContaining({ code: 'SESSION_PROJECTION_INVALID_UNIT' }))
  })
})

describe('onChanged', () => {
  it('pushes the seq of each change, only when the view reference changes', () => {
    const { sessions, registry } = harness()
    registry.register(lastTextUnit)
    registry.register(fragileUnit)
    const changes: Array<Omit<ProjectionChange, 'session'>> = []
    const off = registry.onChanged(({ session: _s, ...change }) => void changes.push(change))
    const session = sessions.create()
    session.append('user/message', { text: 'a' }) // 0: both change
    session.append('turn/start', { turn: 1 }) // 1: only fragile
    session.append('tool/call', { turn: 1, callId: 'c', name: 'x', arguments: null }) // 2: fragile fails → absent
    session.append('turn/end', { turn: 1, reason: 'completed' }) // 3: nothing
    session.append('user/message', { text: 'b' }) // 4: lastText
    off()
    session.append('user/message', { text: 'c' })
    expect(changes).toEqual([
      { key: 'lastText', seq: 0, view: 'a' },
      { key: 'fragile', seq: 0, view: 1 },
      { key: 'fragile', seq: 1, view: 2 },
      { key: 'fragile', seq: 2, view: undefined },
      { key: 'lastText', seq: 4, view: 'b' },
    ])
  })
})

describe('onChanged re-entrancy', () => {
  it('a listener that snapshots the session sees every unit at the change, and no later push is lost', () => {
    const { sessions, registry } = harness()
    registry.register(countUnit)
    registry.register(lastTextUnit)
    const seen: unknown[] = []
    registry.onChanged((change) => void seen.push([change.key, change.seq, registry.snapshot(change.session)]))
    const session = sessions.create()
    session.append('user/message', { text: 'a' })
    expect(seen).toEqual([
      ['count', 0, { count: 1, lastText: 'a' }],
      ['lastText', 0, { count: 1, lastText: 'a' }],
    ])
    expect(registry.metrics.logReads).toBe(0)
  })
})

describe('checkpoint, viewCheckpoint and fold', () => {
  function filled() {
    const h = harness()
    h.registry.register(countUnit)
    h.registry.register(lastTextUnit)
    const session = h.sessions.create()
    session.append('user/message', { text: 'a' })
    session.append('assistant/message', { turn: 1, text: 'b' })
    return { ...h, session }
  }

  it('round-trips rows through JSON into the live views', () => {
    const { registry, session } = filled()
    const rows = JSON.parse(JSON.stringify(registry.checkpoint(session)))
    expect(rows).toEqual({
      count: { stateVersion: 1, seq: 1, state: { n: 2 } },
      lastText: { stateVersion: 3, seq: 1, state: { text: 'a' } },
    })
    expect(registry.viewCheckpoint(rows)).toEqual(registry.snapshot(session))
    expect(registry.viewCheckpoint(rows, ['lastText'])).toEqual({ lastText: 'a' })
    expect(registry.checkpoint(new Session({ header: session.header }), ['count'])).toEqual({
      count: { stateVersion: 1, seq: -1, state: { n: 0 } },
    })
  })

  it('ignores rows of another stateVersion and missing rows; throws on poisoned rows', () => {
    const { registry } = filled()
    expect(registry.viewCheckpoint({ count: { stateVersion: 9, seq: 4 as never, state: 'whatever' } })).toEqual({})
    expect(registry.viewCheckpoint({})).toEqual({})
    const poisonedRows: unknown[] = [
      { count: { stateVersion: 1, seq: 4, state: { n: 'two' } } },
      { count: { stateVersion: 1, seq: 4.5, state: { n: 2 } } },
      { count: { stateVersion: 1, seq: 4, state: { n: 2 }, failed: 'yes' } },
      { count: null },
      { count: { seq: 1, state: { n: 1 } } },
    ]
    for (const rows of poisonedRows) {
      expect(() => registry.viewCheckpoint(rows as never)).toThrow(
        expect.objectContaining({ code: 'SESSION_PROJECTION_INVALID_CHECKPOINT' }),
      )
    }
    expect(() => registry.viewCheckpoint(null as never)).toThrow(expect.objectContaining({ code: 'SESSION_PROJECTION_INVALID_CHECKPOINT' }))
  })

  it('fold agrees with the live snapshot and validates its input', () => {
    const { registry, session } = filled()
    const applies = registry.metrics.applies
    expect(registry.fold(session.events, { inheritedEventCount: 0 as never })).toEqual(registry.snapshot(session))
    expect(registry.fold(session.events, { inheritedEventCount: 2 as never }, ['count'])).toEqual({ count: 2 })
    expect(registry.metrics.applies).toBe(applies) // detached: no live cell moved
    expect(registry.metrics.detachedApplies).toBe(6)
    const events = session.events
    const cases: Array<[readonly unknown[], number]> = [
      [events, 3],
      [events, -1],
      [events.slice(1), 0],
      [[events[1], events[0]], 0],
    ]
    for (const [input, cut] of cases) {
      expect(() => registry.fold(input as SessionEvent[], { inheritedEventCount: cut as never })).toThrow(
        expect.objectContaining({ code: 'SESSION_PROJECTION_INVALID_FOLD_INPUT' }),
      )
    }
    expect(() => registry.fold(events, { inheritedEventCount: 0 as never }, ['nope' as never])).toThrow(
      expect.objectContaining({ code: 'SESSION_PROJECTION_UNKNOWN_KEY' }),
    )
  })
})

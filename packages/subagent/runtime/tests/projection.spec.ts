import { Context } from '@dsh/context'
import { SessionLogOffset, SessionSeq, SessionStore, type StoredSessionEvent } from '@dsh/session'
import { createProjectionRegistry } from '@dsh/session-projection'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  registerSubagentUnits,
  SUBAGENT_IDENTITY_STATE_VERSION,
  subagentIdentityUnit,
  subagentProfileUnit,
  subagentTimingUnit,
} from '../src/index.js'

function ev(seq: number, type: string, data: unknown, time = 1000 + seq): StoredSessionEvent {
  return { type, seq: SessionSeq(seq), time, data: data as StoredSessionEvent['data'] }
}

function foldIdentity(events: readonly StoredSessionEvent[]) {
  return subagentIdentityUnit.view(events.reduce((s, e) => subagentIdentityUnit.apply(s, e), subagentIdentityUnit.init()))
}

const oneShot = { version: 2, mode: 'one-shot', provider: 'scripted', label: 'scan' }
const continuable = { version: 2, mode: 'continuable', provider: 'scripted', label: 'helper' }

describe('the subagent identity unit', () => {
  it('is registered under key subagent with stateVersion 3 (its schema is the harness descriptor schema)', () => {
    expect(subagentIdentityUnit.key).toBe('subagent')
    expect(subagentIdentityUnit.stateVersion).toBe(3)
    expect(SUBAGENT_IDENTITY_STATE_VERSION).toBe(3)
  })

  it('folds mode and label and carries the seq of the descriptor it came from', () => {
    expect(foldIdentity([ev(0, 'user/message', { text: 'x' }), ev(1, 'subagent/descriptor', continuable)])).toEqual({
      mode: 'continuable',
      label: 'helper',
      seq: 1,
    })
    expect(foldIdentity([ev(0, 'subagent/descriptor', { version: 2, mode: 'one-shot', provider: 'p' })])).toEqual({
      mode: 'one-shot',
      seq: 0,
    })
  })

  it('maps a log without a descriptor to the null sentinel', () => {
    expect(foldIdentity([])).toBeNull()
    expect(foldIdentity([ev(0, 'turn/start', { turn: 1 }), ev(1, 'turn/end', { turn: 1, reason: 'completed' })])).toBeNull()
  })

  it('is last-wins: a later descriptor replaces an earlier (e.g. inherited) one', () => {
    expect(foldIdentity([ev(0, 'subagent/descriptor', oneShot), ev(1, 'subagent/descriptor', continuable)])).toEqual({
      mode: 'continuable',
      label: 'helper',
      seq: 1,
    })
  })

  it.each([
    ['a corrupt payload', { version: 2, mode: 'continuable', provider: 'p' }],
    ['an unknown version', { version: 3, mode: 'one-shot', provider: 'p' }],
    ['an extra key', { ...oneShot, surprise: true }],
    ['a one-shot with a continuable field', { ...oneShot, persona: 'terse' }],
    ['a non-object', 'descriptor'],
  ])('resets to null on %s, even after a healthy descriptor', (_name, payload) => {
    expect(foldIdentity([ev(0, 'subagent/descriptor', continuable), ev(1, 'subagent/descriptor', payload)])).toBeNull()
  })

  it('returns the same state reference for events that change nothing', () => {
    const state = subagentIdentityUnit.apply(subagentIdentityUnit.init(), ev(0, 'subagent/descriptor', oneShot))
    expect(subagentIdentityUnit.apply(state, ev(1, 'user/message', { text: 'x' }))).toBe(state)
    const empty = subagentIdentityUnit.init()
    expect(subagentIdentityUnit.apply(empty, ev(0, 'subagent/descriptor', { broken: true }))).toBe(empty)
  })

  it('never throws, whatever the event', () => {
    // Turn data too, so starts and ends pair up and the timing unit sums turns at any times (extremes included).
    const data = fc.oneof(fc.jsonValue(), fc.record({ turn: fc.integer({ min: 0, max: 2 }) }))
    const event = fc.record({
      type: fc.oneof(fc.constant('subagent/descriptor'), fc.constant('turn/start'), fc.constant('turn/end'), fc.string()),
      data,
      time: fc.double(),
    })
    fc.assert(
      fc.property(fc.array(event, { maxLength: 20 }), (raw) => {
        const events = raw.map((e, i) => ({ ...e, seq: SessionSeq(i) }) as StoredSessionEvent)
        const identity = foldIdentity(events)
        if (identity !== null) expect(events[identity.seq]?.type).toBe('subagent/descriptor')
        let timing = subagentTimingUnit.init()
        for (const e of events) timing = subagentTimingUnit.apply(timing, e)
        const view = subagentTimingUnit.view(timing)
        expect(view.settledMs).toBeGreaterThanOrEqual(0)
        // The span's ends are both known or both not, in order, and a cached row of it checks.
        expect(view.startedAt === null).toBe(view.endedAt === null)
        if (view.startedAt !== null) expect(view.endedAt).toBeGreaterThanOrEqual(view.startedAt)
        expect(subagentTimingUnit.schema.safeParse(JSON.parse(JSON.stringify(timing))).success).toBe(true)
      }),
    )
  })

  it('validates checkpoint state strictly (a poisoned row is rejected)', () => {
    expect(subagentIdentityUnit.schema.safeParse({}).success).toBe(true)
    expect(subagentIdentityUnit.schema.safeParse({ identity: { mode: 'continuable', label: 'x', seq: 4 } }).success).toBe(true)
    expect(subagentIdentityUnit.schema.safeParse({ identity: { mode: 'continuable', seq: 4 } }).success).toBe(false)
    expect(subagentIdentityUnit.schema.safeParse({ identity: { mode: 'one-shot', seq: -1 } }).success).toBe(false)
    expect(subagentIdentityUnit.schema.safeParse({ identity: { mode: 'one-shot', seq: 1.5 } }).success).toBe(false)
    expect(subagentIdentityUnit.schema.safeParse({ identity: { mode: 'one-shot', seq: 1, extra: 1 } }).success).toBe(false)
  })
})

describe('the subagentTiming unit', () => {
  function foldTiming(events: readonly StoredSessionEvent[]) {
    return subagentTimingUnit.view(events.reduce((s, e) => subagentTimingUnit.apply(s, e), subagentTimingUnit.init()))
  }

  it('sums settled turns and reports the active one', () => {
    const events = [
      ev(0, 'subagent/descriptor', oneShot, 0),
      ev(1, 'turn/start', { turn: 1 }, 100),
      ev(2, 'turn/end', { turn: 1, reason: 'completed' }, 350),
      ev(3, 'turn/start', { turn: 2 }, 400),
    ]
    expect(foldTiming(events)).toEqual({
      settledMs: 250,
      activeTurn: { turn: 2, startedAt: 400 },
      startedAt: 0,
      endedAt: 400,
      closed: false,
    })
    expect(foldTiming([...events, ev(4, 'turn/end', { turn: 2, reason: 'cancelled' }, 450)])).toEqual({
      settledMs: 300,
      activeTurn: null,
      startedAt: 0,
      endedAt: 450,
      closed: false,
    })
  })

  it('resets on a descriptor, so turns inherited through a fork are not billed to the child', () => {
    const events = [
      ev(0, 'turn/start', { turn: 1 }, 0),
      ev(1, 'turn/end', { turn: 1, reason: 'completed' }, 5000),
      ev(2, 'subagent/descriptor', oneShot, 6000),
      ev(3, 'turn/start', { turn: 2 }, 6000),
      ev(4, 'turn/end', { turn: 2, reason: 'completed' }, 6010),
    ]
    expect(foldTiming(events)).toEqual({ settledMs: 10, activeTurn: null, startedAt: 6000, endedAt: 6010, closed: false })
  })

  it('keeps the turn a descriptor arrives in: a child that writes it inside its first turn is billed that whole turn', () => {
    const events = [
      ev(0, 'turn/start', { turn: 1 }, 100),
      ev(1, 'subagent/descriptor', oneShot, 130),
      ev(2, 'assistant/message', { turn: 1, text: 'x' }, 200),
    ]
    expect(foldTiming(events)).toEqual({
      settledMs: 0,
      activeTurn: { turn: 1, startedAt: 100 },
      startedAt: 130,
      endedAt: 130,
      closed: false,
    })
    expect(foldTiming([...events, ev(3, 'turn/end', { turn: 1, reason: 'completed' }, 400)])).toEqual({
      settledMs: 300,
      activeTurn: null,
      startedAt: 130,
      endedAt: 400,
      closed: false,
    })
  })

  it('drops inherited settled time but keeps the open turn when a later descriptor arrives', () => {
    const events = [
      ev(0, 'turn/start', { turn: 1 }, 0),
      ev(1, 'turn/end', { turn: 1, reason: 'completed' }, 50),
      ev(2, 'turn/start', { turn: 2 }, 60),
      ev(3, 'subagent/descriptor', oneShot, 70),
      ev(4, 'turn/end', { turn: 2, reason: 'completed' }, 90),
    ]
    expect(foldTiming(events)).toEqual({ settledMs: 30, activeTurn: null, startedAt: 70, endedAt: 90, closed: false })
    expect(subagentTimingUnit.stateVersion).toBe(4)
  })

  it('keeps settled time finite when a turn spans more than the largest double (the store takes any finite time)', () => {
    const events = [ev(0, 'turn/start', { turn: 1 }, -1.0977121702440959e293), ev(1, 'turn/end', { turn: 1 }, 1.7976931348623147e308)]
    const state = events.reduce((s, e) => subagentTimingUnit.apply(s, e), subagentTimingUnit.init())
    expect(state.settledMs).toBe(Number.MAX_VALUE)
    expect(subagentTimingUnit.schema.safeParse(JSON.parse(JSON.stringify(state))).success).toBe(true)
    const again = [...events, ev(2, 'turn/start', { turn: 2 }, 0), ev(3, 'turn/end', { turn: 2 }, Number.MAX_VALUE)]
    expect(foldTiming(again).settledMs).toBe(Number.MAX_VALUE)
  })

  it('ignores a turn/end of another turn', () => {
    expect(foldTiming([ev(0, 'turn/start', { turn: 1 }, 0), ev(1, 'turn/end', { turn: 9, reason: 'completed' }, 10)])).toEqual({
      settledMs: 0,
      activeTurn: { turn: 1, startedAt: 0 },
      startedAt: 0,
      endedAt: 10,
      closed: false,
    })
  })

  it("spans the session's own turns in wall-clock time: from the first start (a subagent's descriptor) to the latest boundary", () => {
    expect(foldTiming([])).toEqual({ settledMs: 0, activeTurn: null, startedAt: null, endedAt: null, closed: false })
    const own = [
      ev(0, 'turn/start', { turn: 1 }, 1_000),
      ev(1, 'user/message', { text: 'go' }, 1_005),
      ev(2, 'assistant/message', { turn: 1, text: 'x' }, 1_900),
      ev(3, 'turn/end', { turn: 1, reason: 'completed' }, 2_000),
    ]
    expect(foldTiming(own)).toMatchObject({ startedAt: 1_000, endedAt: 2_000 })
    expect(foldTiming(own.slice(0, 3))).toMatchObject({ startedAt: 1_000, endedAt: 1_000 })
    // Inherited history (a fork prefix) precedes the descriptor; the child's span starts there.
    const child = [...own, ev(4, 'subagent/descriptor', oneShot, 5_000), ev(5, 'turn/start', { turn: 2 }, 5_010)]
    expect(foldTiming(child)).toMatchObject({ startedAt: 5_000, endedAt: 5_010 })
    // Other events, and a boundary without a finite time or stamped earlier than the latest, leave the state as it is.
    const state = own.reduce((s, e) => subagentTimingUnit.apply(s, e), subagentTimingUnit.init())
    expect(subagentTimingUnit.apply(state, ev(4, 'user/message', { text: 'x' }, 9_000))).toBe(state)
    expect(subagentTimingUnit.apply(state, ev(4, 'turn/start', { turn: 2 }, Number.NaN))).toBe(state)
    expect(subagentTimingUnit.apply(state, ev(4, 'turn/end', { turn: 1, reason: 'completed' }, 1_500))).toBe(state)
    expect(subagentTimingUnit.view(subagentTimingUnit.apply(state, ev(4, 'turn/start', { turn: 2 }, 2_500)))).toMatchObject({
      startedAt: 1_000,
      endedAt: 2_500,
    })
  })
})

describe('the subagentTiming unit: closed', () => {
  const continuable = { version: 2, mode: 'continuable', provider: 'p', label: 'helper' }
  const own = [
    ev(0, 'subagent/descriptor', continuable, 0),
    ev(1, 'subagent/start', { kind: 'spawn', turn: 1 }, 10),
    ev(2, 'turn/start', { turn: 1 }, 10),
    ev(3, 'turn/end', { turn: 1, reason: 'completed' }, 20),
    ev(4, 'subagent/end', { turn: 1, reason: 'completed' }, 20),
  ]
  const fold = (events: readonly StoredSessionEvent[]) => events.reduce((s, e) => subagentTimingUnit.apply(s, e), subagentTimingUnit.init())

  it("marks the child closed at its final subagent/end {reason:'closed'} and at no other end, leaving its span and time as they are", () => {
    const settled = fold(own)
    expect(subagentTimingUnit.view(settled).closed).toBe(false)
    const closed = subagentTimingUnit.apply(settled, ev(5, 'subagent/end', { reason: 'closed', dropped: 1 }, 99))
    expect(subagentTimingUnit.view(closed)).toEqual({ settledMs: 10, activeTurn: null, startedAt: 0, endedAt: 20, closed: true })
    expect(subagentTimingUnit.schema.safeParse(JSON.parse(JSON.stringify(closed))).success).toBe(true)
    // Ends of other reasons, malformed ones and a second close change nothing.
    expect(subagentTimingUnit.apply(settled, ev(5, 'subagent/end', { turn: 2, reason: 'budget' }, 99))).toBe(settled)
    expect(subagentTimingUnit.apply(settled, ev(5, 'subagent/end', null, 99))).toBe(settled)
    expect(subagentTimingUnit.apply(closed, ev(6, 'subagent/end', { reason: 'closed' }, 100))).toBe(closed)
    // The mark survives later turn boundaries; a descriptor (a fork of a closed session) clears it.
    expect(subagentTimingUnit.view(subagentTimingUnit.apply(closed, ev(6, 'turn/start', { turn: 2 }, 120))).closed).toBe(true)
    expect(subagentTimingUnit.view(subagentTimingUnit.apply(closed, ev(6, 'subagent/descriptor', continuable, 130))).closed).toBe(false)
  })

  it('checks a cached closed mark plainly: only `closed: true` is a state', () => {
    expect(subagentTimingUnit.schema.safeParse({ settledMs: 0, closed: true }).success).toBe(true)
    expect(subagentTimingUnit.schema.safeParse({ settledMs: 0, closed: false }).success).toBe(false)
    expect(subagentTimingUnit.schema.safeParse({ settledMs: 0, closed: 'yes' }).success).toBe(false)
  })
})

describe('the subagentProfile unit', () => {
  function foldProfile(events: readonly StoredSessionEvent[]) {
    return subagentProfileUnit.view(events.reduce((s, e) => subagentProfileUnit.apply(s, e), subagentProfileUnit.init()))
  }
  const options = { version: 1, model: 'm', maxTurns: 2 }

  it('folds the descriptor and the options recorded after it, each with its seq', () => {
    expect(foldProfile([ev(0, 'subagent/descriptor', continuable), ev(1, 'subagent/options', options)])).toEqual({
      seq: 0,
      descriptor: continuable,
      options: { seq: 1, options },
    })
    expect(foldProfile([ev(0, 'subagent/descriptor', continuable)])).toEqual({ seq: 0, descriptor: continuable, options: null })
    expect(subagentProfileUnit.stateVersion).toBe(2)
  })

  it('drops earlier options at a new descriptor (an inherited child never runs with its ancestor options)', () => {
    expect(
      foldProfile([ev(0, 'subagent/descriptor', continuable), ev(1, 'subagent/options', options), ev(2, 'subagent/descriptor', oneShot)]),
    ).toEqual({ seq: 2, descriptor: oneShot, options: null })
  })

  it('drops options on an invalid options event, and is null without a valid descriptor', () => {
    expect(
      foldProfile([
        ev(0, 'subagent/descriptor', continuable),
        ev(1, 'subagent/options', options),
        ev(2, 'subagent/options', { version: 1, x: 1 }),
      ]),
    ).toEqual({ seq: 0, descriptor: continuable, options: null })
    expect(foldProfile([ev(0, 'subagent/options', options)])).toBeNull()
    expect(foldProfile([ev(0, 'subagent/descriptor', { ...oneShot, persona: 'x' }), ev(1, 'subagent/options', options)])).toBeNull()
  })
})

describe('registration in the real registry', () => {
  it('gives live snapshots, detached folds and checkpoint round trips the same identity', () => {
    const ctx = new Context()
    let n = 0
    const sessions = new SessionStore(ctx, { newId: () => `s${++n}` })
    const registry = createProjectionRegistry(ctx)
    const release = registerSubagentUnits(registry)
    expect(registry.keys().sort()).toEqual(['subagent', 'subagentProfile', 'subagentTiming'])
    const parent = sessions.create()
    parent.append('subagent/descriptor', { version: 2, mode: 'one-shot', provider: 'p', label: 'ancestor' })
    const child = sessions.fork(parent, { origin: 'subagent' })
    // Before its own descriptor the child only sees the ancestor's identity, whose seq is inherited.
    const inherited = registry.snapshot(child, ['subagent']).subagent
    expect(inherited).toEqual({ mode: 'one-shot', label: 'ancestor', seq: 0 })
    expect(child.isOwnSeq(inherited!.seq)).toBe(false)
    child.append('subagent/descriptor', { version: 2, mode: 'continuable', provider: 'p', label: 'mine' })
    const live = registry.snapshot(child, ['subagent', 'subagentTiming'])
    expect(live.subagent).toEqual({ mode: 'continuable', label: 'mine', seq: 1 })
    expect(child.isOwnSeq(live.subagent!.seq)).toBe(true)
    expect(registry.fold(child.events, { inheritedEventCount: SessionLogOffset(1) }, ['subagent']).subagent).toEqual(live.subagent)
    const rows = JSON.parse(JSON.stringify(registry.checkpoint(child, ['subagent']))) as ReturnType<typeof registry.checkpoint>
    expect(registry.viewCheckpoint(rows, ['subagent']).subagent).toEqual(live.subagent)
    // A row of another state version (folded under other rules) is ignored, not misread.
    expect(registry.viewCheckpoint({ subagent: { ...rows.subagent!, stateVersion: 1 } }, ['subagent']).subagent).toBeUndefined()
    expect(registry.viewCheckpoint({ subagent: { ...rows.subagent!, stateVersion: 2 } }, ['subagent']).subagent).toBeUndefined()
    release()
    expect(registry.keys()).toEqual([])
  })
})

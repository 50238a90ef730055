/**
 * `@dsh/session-projection/testing`: the contract suite every projection unit
 * runs. `vitest` is an optional peer: only this subpath loads it.
 *
 * Given a unit and a script of events from its domain, the suite checks what
 * the registry relies on: `init` is told the session's cut (fresh sessions,
 * forks cut at every position, restored sessions, detached folds); live
 * snapshots, detached folds and revived checkpoints agree; states are plain
 * JSON that pass the unit's schema; `apply` never mutates a state and returns
 * the same reference for an event it does not know; and a copy of the unit
 * that throws in `init`, `apply` or `view` is isolated (absent) while the
 * unit itself and a plain counter keep exact values. A unit that declares
 * `neverThrows` is also fed every script event with each field replaced by
 * garbage, and bad times.
 */
import { Context, type Logger } from '@dsh/context'
import { freezeLosslessJson, type Session, SessionStore, type StoredSessionEvent } from '@dsh/session'
import { describe, expect, it } from 'vitest'
import { createProjectionRegistry, type ProjectionRegistry } from './registry.js'
import type { ProjectionInitContext, ProjectionKey, SessionProjectionUnit } from './types.js'

/** One scripted event; `time` defaults to one millisecond after the previous event. */
export interface ScriptedEvent {
  readonly type: string
  readonly data: unknown
  readonly time?: number
}

/** Any unit, whatever its key and state types (what the suite needs to see of it). */
export interface ProjectionUnitLike {
  readonly key: string
  readonly stateVersion: number
  init(context?: ProjectionInitContext): unknown
  apply(state: never, event: StoredSessionEvent): unknown
  view(state: never): unknown
  readonly schema: { safeParse(input: unknown): unknown }
}

export interface ProjectionUnitTarget {
  /** The unit under test, as applications register it. */
  readonly unit: ProjectionUnitLike
  /** A session's events in the unit's domain, in order (tens of events: forks are cut at every position). */
  readonly script: readonly ScriptedEvent[]
  /** The unit promises never to throw, whatever the event data or time. */
  readonly neverThrows?: boolean
  /** The unit returns the same state for an event type it does not know (default true; a unit counting every event says false). */
  readonly ignoresUnknownTypes?: boolean
}

/** The erased shape the suite drives (keys and states are opaque to it). */
interface AnyUnit {
  readonly key: string
  readonly stateVersion: number
  init(context?: ProjectionInitContext): unknown
  apply(state: unknown, event: StoredSessionEvent): unknown
  view(state: unknown): unknown
  readonly schema: { safeParse(input: unknown): { success: boolean; data?: unknown } }
}

const T0 = 1_700_000_000_000
const COUNT = 'suite/count'

function asUnit(unit: AnyUnit): SessionProjectionUnit {
  return unit as unknown as SessionProjectionUnit
}

/** Counts every event (the healthy neighbour in the isolation checks). */
const countUnit: AnyUnit = {
  key: COUNT,
  stateVersion: 1,
  init: () => ({ n: 0 }),
  apply: (state) => ({ n: (state as { n: number }).n + 1 }),
  view: (state) => (state as { n: number }).n,
  schema: { safeParse: (input) => ({ success: typeof (input as { n?: unknown })?.n === 'number', data: input }) },
}

interface Host {
  readonly sessions: SessionStore
  readonly registry: ProjectionRegistry
  readonly warnings: string[]
  /** Appends `script[from..to)` to `session` at the scripted times. */
  play(session: Session, script: readonly ScriptedEvent[], from?: number, to?: number): void
}

function host(): Host {
  const warnings: string[] = []
  const logger: Logger = { warn: (message) => void warnings.push(message), error: (message) => void warnings.push(message) }
  const ctx = new Context({ logger })
  ctx.provide('logger', logger)
  let now = T0
  let n = 0
  const sessions = new SessionStore(ctx, { clock: () => now, newId: () => `suite-${++n}` })
  ctx.provide('sessions', sessions)
  const registry = createProjectionRegistry(ctx)
  const times: number[] = []
  const play = (session: Session, script: readonly ScriptedEvent[], from = 0, to = script.length) => {
    for (let i = from; i < to; i++) {
      const entry = script[i] as ScriptedEvent
      now = entry.time ?? (times[i - 1] ?? T0) + 1
      times[i] = now
      session.append(entry.type, entry.data)
    }
  }
  return { sessions, registry, warnings, play }
}

/** The unit's state after every event of `events`, each state deep-frozen before the next apply. */
function frozenStates(unit: AnyUnit, events: readonly StoredSessionEvent[], cut: number): unknown[] {
  let state = freezeLosslessJson(unit.init(Object.freeze({ inheritedEventCount: cut as never })), `${unit.key} init state`)
  const states = [state]
  for (const event of events) {
    state = freezeLosslessJson(unit.apply(state, event), `${unit.key} state after event ${event.seq}`)
    states.push(state)
  }
  return states
}

/** Seeded sessions cut at every position of the script, each completed with the rest of it. */
function forksAtEveryCut(h: Host, script: readonly ScriptedEvent[]): Session[] {
  const full = h.sessions.create()
  h.play(full, script)
  const out = [full]
  for (let cut = 1; cut <= script.length; cut++) {
    const fork = h.sessions.create({ seed: full.events.slice(0, cut), inheritedEventCount: cut })
    h.play(fork, script, cut)
    out.push(fork)
  }
  return out
}

function garbageOf(data: unknown): unknown[] {
  const values: unknown[] = [null, undefined, -1, 1.5, Number.MAX_SAFE_INTEGER + 2, '', 'x', [], {}, { nested: [null] }]
  const out: unknown[] = [...values.filter((value) => value !== undefined)]
  if (typeof data === 'object' && data !== null && !Array.isArray(data)) {
    for (const key of Object.keys(data)) {
      for (const value of values) {
        const copy: Record<string, unknown> = { ...(data as Record<string, unknown>) }
        if (value === undefined) delete copy[key]
        else copy[key] = value
        out.push(copy)
        const inner = (data as Record<string, unknown>)[key]
        if (typeof inner === 'object' && inner !== null && !Array.isArray(inner)) {
          for (const innerKey of Object.keys(inner)) out.push({ ...copy, [key]: { ...inner, [innerKey]: value ?? null } })
        }
      }
    }
  }
  return out
}

/** Registers the contract tests of one projection unit. */
export function projectionUnitSuite(name: string, target: ProjectionUnitTarget): void {
  const unit = target.unit as unknown as AnyUnit
  const { script } = target
  if (script.length < 2) throw new Error(`projectionUnitSuite '${name}': the script needs at least two events (forks are cut inside it).`)

  describe(`projection unit contract: ${name}`, () => {
    it('init is told the cut: 0 for a fresh session, the cut for forks and restored sessions, the given cut for a fold', () => {
      const h = host()
      const seen: number[] = []
      h.registry.register(
        asUnit({
          ...unit,
          init: (context) => {
            seen.push(context?.inheritedEventCount ?? Number.NaN)
            return unit.init(context)
          },
          apply: unit.apply,
          view: unit.view,
          schema: unit.schema,
        }),
      )
      const sessions = forksAtEveryCut(h, script)
      for (const session of sessions) h.registry.snapshot(session)
      expect(seen).toEqual(sessions.map((session) => session.inheritedEventCount))
      const full = sessions[0] as Session
      const restored = h.sessions.restore({
        header: { ...full.header, id: 'restored' as never },
        inheritedEventCount: 1,
        events: full.events,
      })
      h.registry.snapshot(restored)
      expect(seen.at(-1)).toBe(script.length > 0 ? 1 : Number.NaN)
      seen.length = 0
      h.registry.fold(full.events, { inheritedEventCount: Math.floor(script.length / 2) as never })
      expect(seen).toEqual([Math.floor(script.length / 2)])
    })

    it('a live snapshot equals a detached fold and a revived checkpoint, for the session and a fork cut at every position', () => {
      const h = host()
      h.registry.register(asUnit(unit))
      for (const session of forksAtEveryCut(h, script)) {
        const live = h.registry.snapshot(session, [unit.key as ProjectionKey])
        expect(Object.keys(live)).toEqual([unit.key])
        expect(h.registry.fold(session.events, { inheritedEventCount: session.inheritedEventCount }, [unit.key as ProjectionKey])).toEqual(
          live,
        )
        const rows = JSON.parse(JSON.stringify(h.registry.checkpoint(session, [unit.key as ProjectionKey])))
        expect(h.registry.viewCheckpoint(rows, [unit.key as ProjectionKey])).toEqual(live)
      }
      expect(h.warnings).toEqual([])
    })

    it('states are plain JSON that pass the schema, and apply never mutates the state it is given', () => {
      const h = host()
      const full = h.sessions.create()
      h.play(full, script)
      for (const cut of [0, Math.floor(script.length / 2)]) {
        const states = frozenStates(unit, full.events, cut)
        for (const state of states) {
          const parsed = unit.schema.safeParse(JSON.parse(JSON.stringify(state)))
          expect(parsed.success).toBe(true)
          expect(unit.view(parsed.data)).toEqual(unit.view(state))
        }
      }
    })

    if (target.ignoresUnknownTypes !== false) {
      it('an event of a type the unit does not know returns the same state reference', () => {
        const h = host()
        const full = h.sessions.create()
        h.play(full, script)
        let state = unit.init(Object.freeze({ inheritedEventCount: 0 as never }))
        const stranger = (seq: number): StoredSessionEvent => ({
          type: 'suite/unknown-type',
          seq: seq as never,
          time: T0,
          data: { text: 'x' },
        })
        expect(unit.apply(state, stranger(0))).toBe(state)
        for (const event of full.events) {
          state = unit.apply(state, event)
          expect(unit.apply(state, stranger(event.seq + 1))).toBe(state)
        }
      })
    }

    it('a copy that throws in init, apply or view is isolated; the unit and a counter keep exact values', () => {
      const h = host()
      const middle = Math.floor(script.length / 2)
      const variant = (suffix: string, overrides: Partial<AnyUnit>): AnyUnit => ({
        key: `${unit.key}/${suffix}`,
        stateVersion: unit.stateVersion,
        init: unit.init,
        apply: unit.apply,
        view: unit.view,
        schema: unit.schema,
        ...overrides,
      })
      const throwsInForkInit = variant('throws-in-fork-init', {
        init: (context) => {
          if ((context?.inheritedEventCount ?? 0) > 0) throw new Error('suite: no forks')
          return unit.init(context)
        },
      })
      const throwsInApply = variant('throws-in-apply', {
        apply: (state, event) => {
          if (event.seq >= middle) throw new Error('suite: apply failed')
          return unit.apply(state, event)
        },
      })
      const throwsInView = variant('throws-in-view', {
        view: () => {
          throw new Error('suite: view failed')
        },
      })
      for (const u of [unit, countUnit, throwsInForkInit, throwsInApply, throwsInView]) h.registry.register(asUnit(u))
      const sessions = forksAtEveryCut(h, script)
      for (const session of sessions) {
        const fork = session.inheritedEventCount > 0
        const snapshot = h.registry.snapshot(session) as Record<string, unknown>
        const alone = h.registry.fold(session.events, { inheritedEventCount: session.inheritedEventCount }, [unit.key as ProjectionKey])
        const expected: Record<string, unknown> = { [unit.key]: (alone as Record<string, unknown>)[unit.key], [COUNT]: session.seq }
        if (!fork) expected[throwsInForkInit.key] = expected[unit.key]
        if (session.seq <= middle) expected[throwsInApply.key] = expected[unit.key]
        expect(snapshot).toEqual(expected)
        expect(h.registry.fold(session.events, { inheritedEventCount: session.inheritedEventCount })).toEqual(expected)
        expect(h.registry.viewCheckpoint(JSON.parse(JSON.stringify(h.registry.checkpoint(session))))).toEqual(expected)
      }
    })

    if (target.neverThrows === true) {
      it('never throws: every scripted event with each field replaced by garbage, and bad times', () => {
        const h = host()
        const full = h.sessions.create()
        h.play(full, script)
        const cuts = [0, Math.floor(script.length / 2)]
        let applied = 0
        for (const cut of cuts) {
          let state = unit.init(Object.freeze({ inheritedEventCount: cut as never }))
          for (const event of full.events) {
            for (const data of garbageOf(event.data)) {
              for (const time of [event.time, -1, 0, Number.NaN, event.time - 86_400_000]) {
                const bad = { type: event.type, seq: event.seq, time, data } as StoredSessionEvent
                const next = unit.apply(state, bad)
                expect(unit.schema.safeParse(JSON.parse(JSON.stringify(next))).success).toBe(true)
                unit.view(next)
                applied++
              }
            }
            state = unit.apply(state, event)
          }
        }
        expect(applied).toBeGreaterThan(0)
      })
    }
  })
}

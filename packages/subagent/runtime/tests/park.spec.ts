import type { StoredSessionEvent } from '@dsh/session'
import { MemoryPersistenceStorage } from '@dsh/session-persistence'
import { describe, expect, it } from 'vitest'
import type { SubagentDriver, SubagentRunKind } from '../src/index.js'
import { codeOf, gate, type Host, hostsPerTest } from './helpers.js'

const { open: host } = hostsPerTest()

/**
 * A driver whose run of a held prompt keeps its turn open until the test
 * releases it — even once interrupted, so a test sees the child between the
 * stop request and the end of its run. Every other prompt is answered at
 * once (`re: <prompt>`); an aborted run ends `cancelled`. Records each run.
 */
function heldDriver(): {
  driver: SubagentDriver
  runs: [SubagentRunKind | 'drive', string | undefined][]
  hold: (prompt: string) => () => void
  /** Resolves once the run of `prompt` has seen its abort signal fire. */
  aborted: (prompt: string) => Promise<void>
} {
  const gates = new Map<string, ReturnType<typeof gate>>()
  const aborts = new Map<string, ReturnType<typeof gate>>()
  const abortOf = (prompt: string): ReturnType<typeof gate> => {
    const seen = aborts.get(prompt) ?? gate()
    aborts.set(prompt, seen)
    return seen
  }
  const runs: [SubagentRunKind | 'drive', string | undefined][] = []
  const driver: SubagentDriver = {
    name: 'held',
    async run(run) {
      runs.push([run.kind, run.prompt])
      run.session.append('turn/start', { turn: run.turn })
      const prompt = run.prompt
      if (prompt !== undefined) run.signal.addEventListener('abort', () => abortOf(prompt).open(), { once: true })
      const held = prompt === undefined ? undefined : gates.get(prompt)
      if (held !== undefined) await held.promise
      if (run.signal.aborted) {
        run.session.append('turn/end', { turn: run.turn, reason: 'cancelled' })
        return { reason: 'cancelled' }
      }
      const text = `re: ${run.prompt ?? ''}`
      run.session.append('assistant/message', { turn: run.turn, text })
      run.session.append('turn/end', { turn: run.turn, reason: 'completed' })
      return { reason: 'completed', text }
    },
  }
  const hold = (prompt: string): (() => void) => {
    const held = gate()
    gates.set(prompt, held)
    return held.open
  }
  return { driver, runs, hold, aborted: (prompt) => abortOf(prompt).promise }
}

function ofType(events: readonly StoredSessionEvent[], type: string): unknown[] {
  return events.filter((e) => e.type === type).map((e) => e.data)
}

/** The child's own events as stored (it is cold between runs). */
async function stored(h: Host, id: string): Promise<StoredSessionEvent[]> {
  const observed = await h.persistence!.inspect(id as never)
  return observed.events.slice(observed.inheritedEventCount)
}

/**
 * A host on `heldDriver` (sharing `storage` when given) with a continuable
 * child `kid` of `parent` held on `first`, and `second` and `third` queued
 * behind it.
 */
async function busyWithTwoQueued(options: { storage?: MemoryPersistenceStorage; parent?: string } = {}) {
  const held = heldDriver()
  const h = await host({ driver: held.driver, ...(options.storage === undefined ? {} : { storage: options.storage }) })
  const parent = h.sessions.create({ id: options.parent ?? 'parent' })
  const release = held.hold('first')
  const child = h.runtime.spawn(parent, { mode: 'continuable', label: 'worker', context: 'fresh', prompt: 'first', id: 'kid' })
  expect(await h.runtime.send('kid', { caller: parent, text: 'second' })).toEqual({ status: 'queued', position: 1 })
  expect(await h.runtime.send('kid', { caller: parent, text: 'third' })).toEqual({ status: 'queued', position: 2 })
  return { ...held, h, parent, child, release }
}

/** Parks `kid`'s queue with an interrupt that returns at once, then lets the held run end and waits until the child is idle. */
async function parkAndSettle({ h, parent, child, release }: Awaited<ReturnType<typeof busyWithTwoQueued>>): Promise<void> {
  expect(await h.runtime.interrupt('kid', { caller: parent, queued: 'park', until: 'requested' })).toBe(true)
  release()
  expect((await child.done).end).toBe('cancelled')
  await h.runtime.wait(['kid'], { caller: parent })
}

/** The runs of `kid` when `second` and `third` were parked and `fourth` sent after them. */
const PARKED_THEN_FOURTH = [
  ['spawn', 'first'],
  ['message', 'second'],
  ['message', 'third'],
  ['message', 'fourth'],
]
/** Its `subagent/end` events: the interrupted first run, then one per delivered message. */
const ENDS_PARKED_THEN_FOURTH = [
  { turn: 1, reason: 'cancelled' },
  { turn: 2, reason: 'completed', text: 're: second' },
  { turn: 3, reason: 'completed', text: 're: third' },
  { turn: 4, reason: 'completed', text: 're: fourth' },
]

describe("interrupt with queued: 'park'", () => {
  it('returns once the stop is requested, before the run ends; the queued input is not delivered after it', async () => {
    const { h, parent, child, release, runs } = await busyWithTwoQueued()

    expect(await h.runtime.interrupt('kid', { caller: parent, queued: 'park', until: 'requested' })).toBe(true)
    // Asked to stop, not stopped: the run is still in the driver and nothing has ended.
    expect(h.runtime.isRunning('kid')).toBe(true)
    expect(ofType(child.session.events, 'subagent/end')).toEqual([])
    expect(child.session.events.filter((e) => e.type === 'turn/end')).toEqual([])

    release()
    expect((await child.done).end).toBe('cancelled')
    expect(await h.runtime.wait(['kid'], { caller: parent })).toEqual([{ id: 'kid', state: 'settled', reason: 'cancelled' }])
    expect(runs).toEqual([['spawn', 'first']])
    expect(h.runtime.isRunning('kid')).toBe(false)
    const own = await stored(h, 'kid')
    // Both messages stay logged, and no run delivered either.
    expect(ofType(own, 'subagent/queued')).toEqual([
      { from: 'parent', text: 'second' },
      { from: 'parent', text: 'third' },
    ])
    expect(ofType(own, 'subagent/start')).toEqual([{ kind: 'spawn', turn: 1 }])
    expect(ofType(own, 'subagent/end')).toEqual([{ turn: 1, reason: 'cancelled' }])
    expect(ofType(parent.events, 'subagent/notice')).toEqual([
      { kind: 'settled', child: 'kid', mode: 'continuable', label: 'worker', reason: 'cancelled' },
    ])
  })

  it('the next send delivers the parked messages first, in order, then its own', async () => {
    const { h, parent, child, release, runs, aborted } = await busyWithTwoQueued()
    // Without `until`, the interrupt resolves once the run has settled.
    const interrupted = h.runtime.interrupt('kid', { caller: parent, queued: 'park' })
    await aborted('first')
    release()
    expect(await interrupted).toBe(true)
    await child.done

    const sent = await h.runtime.send('kid', { caller: parent, text: 'fourth' })
    expect(sent.status).toBe('started')
    if (sent.status === 'started') expect((await sent.handle.done).text).toBe('re: second')
    await h.runtime.wait(['kid'], { caller: parent })
    expect(runs).toEqual(PARKED_THEN_FOURTH)
    const own = await stored(h, 'kid')
    const queued = own.filter((e) => e.type === 'subagent/queued')
    expect(queued.map((e) => (e.data as { text: string }).text)).toEqual(['second', 'third', 'fourth'])
    expect(ofType(own, 'subagent/start')).toEqual([
      { kind: 'spawn', turn: 1 },
      { kind: 'message', turn: 2, queued: queued[0]!.seq },
      { kind: 'message', turn: 3, queued: queued[1]!.seq },
      { kind: 'message', turn: 4, queued: queued[2]!.seq },
    ])
    expect(ofType(own, 'subagent/end')).toEqual(ENDS_PARKED_THEN_FOURTH)
  })

  it('a message sent after the interrupt but before its run ended wakes the child: the parked input first, then it', async () => {
    const { h, parent, child, release, runs } = await busyWithTwoQueued()
    expect(await h.runtime.interrupt('kid', { caller: parent, queued: 'park', until: 'requested' })).toBe(true)
    expect(await h.runtime.send('kid', { caller: parent, text: 'fourth' })).toEqual({ status: 'queued', position: 3 })
    release()
    expect((await child.done).end).toBe('cancelled')
    await h.runtime.wait(['kid'], { caller: parent })
    expect(runs).toEqual(PARKED_THEN_FOURTH)
  })

  it('on a child with no run in progress it is a no-op: false, its log unchanged, and later input is not parked', async () => {
    const { driver, runs, hold } = heldDriver()
    const h = await host({ driver })
    const parent = h.sessions.create({ id: 'parent' })
    const child = h.runtime.spawn(parent, { mode: 'continuable', label: 'worker', context: 'fresh', prompt: 'first', id: 'kid' })
    await child.done
    const before = await stored(h, 'kid')
    expect(await h.runtime.interrupt('kid', { caller: parent, queued: 'park', until: 'requested' })).toBe(false)
    expect(await h.runtime.interrupt('kid', { caller: parent, queued: 'park' })).toBe(false)
    expect(await stored(h, 'kid')).toEqual(before)

    // Nothing was armed: a turn started afterwards still runs its queued input.
    const release = hold('again')
    expect((await h.runtime.send('kid', { caller: parent, text: 'again' })).status).toBe('started')
    expect(await h.runtime.send('kid', { caller: parent, text: 'then this' })).toEqual({ status: 'queued', position: 1 })
    release()
    await h.runtime.wait(['kid'], { caller: parent })
    expect(runs.map(([, prompt]) => prompt)).toEqual(['first', 'again', 'then this'])
  })

  it('parks across a restart: the queued events stay in the log, and the first send after a cold resume delivers them first', async () => {
    const storage = new MemoryPersistenceStorage()
    const first = await busyWithTwoQueued({ storage, parent: 'p' })
    const { driver, runs } = first
    await parkAndSettle(first)
    await first.h.sessions.dispose('p')
    await first.h.dispose()

    const h = await host({ storage, driver })
    const live = h.sessions.restore(await h.persistence!.load('p' as never))
    const sent = await h.runtime.send('kid', { caller: live, text: 'fourth' })
    expect(sent.status).toBe('started')
    await h.runtime.wait(['kid'], { caller: live })
    expect(runs).toEqual(PARKED_THEN_FOURTH)
    expect(ofType(await stored(h, 'kid'), 'subagent/end')).toEqual(ENDS_PARKED_THEN_FOURTH)
  })

  it('closing a parked child drops the parked messages and counts them', async () => {
    const busy = await busyWithTwoQueued()
    const { h, parent } = busy
    await parkAndSettle(busy)
    expect(await h.runtime.close('kid', { caller: parent })).toEqual({ id: 'kid', interrupted: false, dropped: 2 })
    expect(ofType(await stored(h, 'kid'), 'subagent/end').at(-1)).toEqual({ reason: 'closed', dropped: 2 })
  })

  it('refuses an unknown queued or until value with SUBAGENT_INVALID_ARGUMENT, before anything happens', async () => {
    const { h, parent, child, release, runs } = await busyWithTwoQueued()
    expect(await codeOf(h.runtime.interrupt('kid', { caller: parent, queued: 'drop' as never }))).toBe('SUBAGENT_INVALID_ARGUMENT')
    expect(await codeOf(h.runtime.interrupt('kid', { caller: parent, until: 'never' as never }))).toBe('SUBAGENT_INVALID_ARGUMENT')
    expect(h.runtime.isRunning('kid')).toBe(true)
    release()
    expect((await child.done).end).toBe('completed')
    await h.runtime.wait(['kid'], { caller: parent })
    expect(runs.map(([, prompt]) => prompt)).toEqual(['first', 'second', 'third'])
  })
})

describe('interrupt without parking (the default)', () => {
  it('ends the current run cancelled and still delivers the queued input, in order, after it', async () => {
    const { h, parent, child, release, runs, aborted } = await busyWithTwoQueued()
    const interrupted = h.runtime.interrupt('kid', { caller: parent })
    await aborted('first')
    release()
    expect(await interrupted).toBe(true)
    expect((await child.done).end).toBe('cancelled')
    await h.runtime.wait(['kid'], { caller: parent })
    expect(runs).toEqual([
      ['spawn', 'first'],
      ['message', 'second'],
      ['message', 'third'],
    ])
  })
})

import fc from 'fast-check'
import { afterEach, describe, expect, it } from 'vitest'
import type { SubagentDriver, SubagentRun, SubagentSettings } from '../src/index.js'
import { BACKENDS, openPlace, type Place } from './backends.js'
import { harnessAccepts } from './harness-descriptor-schema.js'

const places: Place[] = []
afterEach(async () => {
  for (const place of places.splice(0)) await place.close()
})

/** A driver that records every run and ends its turn at once. */
function recorder(): SubagentDriver & { runs: SubagentRun[] } {
  const runs: SubagentRun[] = []
  return {
    name: 'recorder',
    runs,
    async run(run) {
      runs.push(run)
      run.session.append('turn/start', { turn: run.turn })
      run.session.append('assistant/message', { turn: run.turn, text: '{"ok":true}' })
      run.session.append('turn/end', { turn: run.turn, reason: 'completed' })
      return { reason: 'completed', text: '{"ok":true}' }
    },
  }
}

const every: SubagentSettings = {
  agentProvider: 'deepseek',
  agentModel: 'deepseek-chat',
  persona: 'You check facts.',
  toolFilter: { allow: ['read'], deny: ['bash'] },
  outputSchema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'] },
  model: 'dsh-model',
  instructions: 'Answer in JSON.',
  maxTurns: 3,
}

describe.each(BACKENDS)('settings outside the descriptor (%s)', (backend) => {
  it('writes a harness descriptor plus subagent/options on spawn, and a cold resume runs with the same settings', async () => {
    const place = await openPlace(backend)
    places.push(place)
    const driver = recorder()
    const h = await place.open({ driver })
    const parent = h.sessions.create({ id: 'parent' })
    const oneShot = h.runtime.spawn(parent, { mode: 'one-shot', label: 'facts', context: 'fresh', settings: every })
    const continuable = h.runtime.spawn(parent, { mode: 'continuable', label: 'helper', context: 'fresh', settings: every })
    expect((await oneShot.done).output).toEqual({ ok: true })
    await continuable.done

    const oneShotLog = (await h.persistence!.inspect(oneShot.id)).events
    expect(oneShotLog.slice(0, 2).map((e) => [e.type, e.data])).toEqual([
      ['subagent/descriptor', { version: 2, mode: 'one-shot', provider: 'recorder', label: 'facts' }],
      ['subagent/options', { version: 1, ...every }],
    ])
    const continuableLog = (await h.persistence!.inspect(continuable.id)).events
    const { agentProvider, agentModel, persona, toolFilter, ...dshOnly } = every
    expect(continuableLog.slice(0, 2).map((e) => [e.type, e.data])).toEqual([
      [
        'subagent/descriptor',
        { version: 2, mode: 'continuable', provider: 'recorder', label: 'helper', agentProvider, agentModel, persona, toolFilter },
      ],
      ['subagent/options', { version: 1, ...dshOnly }],
    ])
    expect(harnessAccepts(oneShotLog[0]!.data)).toBe(true)
    expect(harnessAccepts(continuableLog[0]!.data)).toBe(true)

    // A new process: the continuable child is cold, and its resume reads the settings back from its log.
    await h.dispose()
    const driver2 = recorder()
    const again = await place.open({ driver: driver2 })
    const parentAgain = again.sessions.restore(await again.persistence!.load('parent' as never))
    await (await again.runtime.resume(continuable.id, { caller: parentAgain, prompt: 'more' })).done
    expect(driver.runs.map((run) => run.settings)).toEqual([every, every])
    expect(driver2.runs.map((run) => run.settings)).toEqual([every])
    expect(driver2.runs[0]!.descriptor).toEqual(continuableLog[0]!.data)
  })

  it('never runs a fork with the options its parent child had', async () => {
    const place = await openPlace(backend)
    places.push(place)
    const driver = recorder()
    const h = await place.open({ driver })
    const top = h.sessions.create({ id: 'top' })
    const child = h.runtime.spawn(top, { mode: 'continuable', label: 'a', context: 'fresh', settings: { model: 'm', maxTurns: 2 } })
    await child.done
    const restored = h.sessions.restore(await h.persistence!.load(child.id))
    const grandchild = h.runtime.spawn(restored, { mode: 'one-shot', context: 'fork' })
    await grandchild.done
    expect(driver.runs.map((run) => run.settings)).toEqual([{ model: 'm', maxTurns: 2 }, {}])
  })
})

describe('what spawn writes is what the harness accepts', () => {
  it('for any valid settings, on either mode', async () => {
    const place = await openPlace('memory')
    places.push(place)
    const h = await place.open({ driver: recorder() })
    const parent = h.sessions.create()
    const text = fc.string({ minLength: 1, maxLength: 6 })
    const settings = fc.record(
      {
        agentProvider: text,
        agentModel: text,
        persona: fc.string({ maxLength: 6 }),
        toolFilter: fc.record({ allow: fc.array(text, { maxLength: 2 }) }),
        model: text,
        instructions: fc.string({ maxLength: 6 }),
        maxTurns: fc.integer({ min: 1, max: 9 }),
      },
      { requiredKeys: [] },
    )
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('one-shot' as const, 'continuable' as const), text, settings, async (mode, label, given) => {
        const handle = h.runtime.spawn(parent, { mode, label, context: 'fresh', settings: given })
        const [descriptor, options] = handle.session.events
        expect(descriptor!.type).toBe('subagent/descriptor')
        expect(harnessAccepts(descriptor!.data)).toBe(true)
        await handle.done
        const recorded = options?.type === 'subagent/options' ? (options.data as Record<string, unknown>) : {}
        const { version: _version, ...fromOptions } = recorded
        const fromDescriptor = Object.fromEntries(
          Object.entries(descriptor!.data as Record<string, unknown>).filter(
            ([key]) => !['version', 'mode', 'provider', 'label'].includes(key),
          ),
        )
        expect({ ...fromOptions, ...fromDescriptor }).toEqual(given)
      }),
      { numRuns: 60 },
    )
  })
})

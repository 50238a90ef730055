import type { StoredSessionEvent } from '@dsh/session'
import { describe, expect, it } from 'vitest'
import { createScriptedDriver, RUN_ERROR_MAX_CHARS, type SubagentDriver } from '../src/index.js'
import { boundedRunError } from '../src/limits.js'
import { codeOf, hostsPerTest } from './helpers.js'

const { open: host } = hostsPerTest()

function lifecycle(events: readonly StoredSessionEvent[]): { type: string; reason?: unknown }[] {
  return events
    .filter((e) => e.type === 'subagent/start' || e.type === 'subagent/end')
    .map((e) => (e.type === 'subagent/end' ? { type: e.type, reason: (e.data as { reason?: unknown }).reason } : { type: e.type }))
}

describe('a run whose input, tools or outcome fail', () => {
  it('refuses a prompt that is not a string before the child exists (spawn) or anything is read (resume)', async () => {
    const h = await host({ persistence: false })
    const parent = h.sessions.create({ id: 'parent' })
    const bad = { text: undefined } as unknown as string
    expect(await codeOf(() => h.runtime.spawn(parent, { mode: 'continuable', label: 'w', context: 'fresh', prompt: bad, id: 'kid' }))).toBe(
      'SUBAGENT_INVALID_ARGUMENT',
    )
    expect(h.sessions.get('kid')).toBeUndefined()
    expect(await h.runtime.listChildren(parent.id)).toEqual([])

    const child = h.runtime.spawn(parent, { mode: 'continuable', label: 'w', context: 'fresh', prompt: 'go', id: 'kid' })
    await child.done
    const before = child.session.seq
    expect(await codeOf(h.runtime.resume('kid', { caller: parent, prompt: 42 as unknown as string }))).toBe('SUBAGENT_INVALID_ARGUMENT')
    expect(child.session.seq).toBe(before)
    expect(h.runtime.isRunning('kid')).toBe(false)
    // The child is still idle and resumable.
    const again = await h.runtime.resume('kid', { caller: parent, prompt: 'again' })
    expect((await again.done).end).toBe('completed')
  })

  it('ends the run `error` when the tool provider throws, so the child settles, its parent hears of it, and dispose completes', async () => {
    let calls = 0
    const h = await host({
      tools: () => {
        calls++
        throw new Error('the tool registry is unavailable')
      },
    })
    const parent = h.sessions.create({ id: 'parent' })
    const child = h.runtime.spawn(parent, { mode: 'continuable', label: 'w', context: 'fresh', prompt: 'go', id: 'kid' })
    const settled = await child.done
    expect(calls).toBe(1)
    expect(settled.end).toBe('error')
    expect(String(settled.error)).toContain('the tool registry is unavailable')
    expect(h.runtime.isRunning('kid')).toBe(false)
    expect(lifecycle(child.session.events)).toEqual([{ type: 'subagent/start' }, { type: 'subagent/end', reason: 'error' }])
    const notices = parent.events.filter((e) => e.type === 'subagent/notice').map((e) => (e.data as { reason: string }).reason)
    expect(notices).toEqual(['error'])
    const [entry] = await h.runtime.wait(['kid'], { caller: parent, timeoutMs: 0 })
    expect(entry).toMatchObject({ state: 'settled', reason: 'error' })
  })

  it('holds a failure text to RUN_ERROR_MAX_CHARS in the child’s end, the parent’s notice and the catalog, cut between characters', async () => {
    // A pair split by a cut at the bound would leave half a character: the cut falls before it.
    const message = `${'e'.repeat(RUN_ERROR_MAX_CHARS - 1)}\u{1F600}${'x'.repeat(10 * RUN_ERROR_MAX_CHARS)}`
    const driver: SubagentDriver = {
      name: 'loud',
      async run() {
        return { reason: 'error', error: new Error(message) }
      },
    }
    const h = await host({ driver })
    const parent = h.sessions.create({ id: 'parent' })
    const child = h.runtime.spawn(parent, { mode: 'continuable', label: 'w', context: 'fresh', prompt: 'go', id: 'kid' })
    expect((await child.done).end).toBe('error')
    const kept = 'e'.repeat(RUN_ERROR_MAX_CHARS - 1)
    const expected = `${kept}… (${message.length - kept.length} more characters, RUN_ERROR_MAX_CHARS)`
    const end = child.session.events.find((e) => e.type === 'subagent/end')!.data as { error?: string }
    expect(end.error).toBe(expected)
    const notice = parent.events.find((e) => e.type === 'subagent/notice')!.data as { error?: string }
    expect(notice.error).toBe(expected)
    const [entry] = await h.runtime.wait(['kid'], { caller: parent, timeoutMs: 0 })
    expect(entry).toMatchObject({ state: 'settled', reason: 'error', error: expected })
    // A text at the bound is kept whole.
    const whole = 'w'.repeat(RUN_ERROR_MAX_CHARS)
    expect(boundedRunError(whole)).toBe(whole)
  })

  it('logs an outcome the log cannot hold as an `error` end instead of leaving the child busy', async () => {
    // A driver that breaks the contract: its text is not a string.
    const scripted = createScriptedDriver([{ kind: 'message', text: 'done' }])
    const driver: SubagentDriver = {
      name: 'broken',
      async run(run) {
        await scripted.run(run)
        return { reason: 'completed', text: { note: undefined } as unknown as string }
      },
    }
    const h = await host({ driver })
    const parent = h.sessions.create({ id: 'parent' })
    const child = h.runtime.spawn(parent, { mode: 'continuable', label: 'w', context: 'fresh', prompt: 'go', id: 'kid' })
    const settled = await child.done
    expect(settled.end).toBe('error')
    expect(h.runtime.isRunning('kid')).toBe(false)
    expect(lifecycle(child.session.events)).toEqual([{ type: 'subagent/start' }, { type: 'subagent/end', reason: 'error' }])
    expect(parent.events.filter((e) => e.type === 'subagent/notice')).toHaveLength(1)
    expect(h.warnings.some((w) => w.includes('cannot record'))).toBe(true)
  })

  it.each([
    ['-0', 0],
    ['{"n": -0}', { n: 0 }],
  ])('records a one-shot result %s as the JSON round trip gives it back', async (text, output) => {
    const h = await host({ driver: createScriptedDriver([{ kind: 'message', text }]) })
    const parent = h.sessions.create({ id: 'parent' })
    const child = h.runtime.spawn(parent, { mode: 'one-shot', context: 'fresh', prompt: 'go', settings: { outputSchema: {} } })
    const settled = await child.done
    expect(settled.end).toBe('completed')
    expect(settled.output).toEqual(output)
    expect(Object.is(settled.output, -0)).toBe(false)
    expect(h.runtime.isRunning(child.id)).toBe(false)
  })

  it('ends a one-shot whose result holds a number beyond a double `invalid-output`', async () => {
    const h = await host({ driver: createScriptedDriver([{ kind: 'message', text: '{"n": 1e400}' }]) })
    const parent = h.sessions.create({ id: 'parent' })
    const child = h.runtime.spawn(parent, { mode: 'one-shot', context: 'fresh', prompt: 'go', settings: { outputSchema: {} } })
    const settled = await child.done
    expect(settled.end).toBe('invalid-output')
    expect(String(settled.error)).toContain('too large')
    expect(h.runtime.isRunning(child.id)).toBe(false)
    expect(lifecycle(child.session.events).at(-1)).toEqual({ type: 'subagent/end', reason: 'invalid-output' })
  })
})

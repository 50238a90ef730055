import { type Context, isDshError } from '@dsh/context'
import type { Session } from '@dsh/session'
import { createScriptedDriver, type ScriptStep, type SubagentRuntime, subagentsPlugin } from '@dsh/subagent'
import { afterEach, describe, expect, it } from 'vitest'
import { createListAgentsTool, type ListAgentsTool, listAgentsDescription, subagentControlTools } from '../src/index.js'
import { storeContext } from './support.js'

let ctx: Context | undefined
afterEach(async () => {
  await ctx?.dispose()
  ctx = undefined
})

/** A real host: store, projections, memory persistence, memory query, subagents with a scripted driver. */
async function host(): Promise<{ c: Context; runtime: SubagentRuntime; tool: ListAgentsTool; parent: Session }> {
  const c = await storeContext()
  ctx = c
  // A child labelled 'watcher' holds its turn open until the context is disposed (which interrupts it).
  const held = new Promise<never>(() => {})
  const script = (label: string | undefined): ScriptStep[] =>
    label === 'watcher' ? [{ kind: 'until', promise: held }] : [{ kind: 'message', text: 'done' }]
  await c.activate(subagentsPlugin({ driver: createScriptedDriver((run) => script(run.identity?.label)) }))
  const runtime = c.require('subagents')
  return { c, runtime, tool: createListAgentsTool(runtime), parent: c.require('sessions').create({ id: 'parent' }) }
}

/**
 * Under `parent`, in creation order: a finished one-shot `child-a` (with a
 * continuable grandchild `deep` and a damaged grandchild), a continuable
 * `child-b` in storage only, the running continuable `child-c`, a damaged
 * child whose descriptor claims one-shot (`child-d`), a continuable `child-e`
 * loaded between turns, and a damaged child whose descriptor claims
 * continuable (`child-f`).
 */
async function family(c: Context, runtime: SubagentRuntime, parent: Session): Promise<void> {
  const sessions = c.require('sessions')
  const persistence = c.require('sessionPersistence')
  await runtime.spawn(parent, { mode: 'one-shot', label: 'scan the repo', context: 'fresh', id: 'child-a' }).done
  await runtime.spawn(parent, { mode: 'continuable', label: 'reviewer', context: 'fresh', id: 'child-b' }).done
  runtime.spawn(parent, { mode: 'continuable', label: 'watcher', context: 'fresh', id: 'child-c' })
  const damaged = (id: string, under: string, descriptor: Record<string, unknown>, depth: number) => {
    const broken = sessions.create({ id, origin: 'subagent', parentSession: under, delegationDepth: depth })
    broken.append('subagent/descriptor', descriptor as never)
    return sessions.dispose(id)
  }
  await damaged('child-d', parent.id, { version: 7, mode: 'one-shot', provider: 'scripted' }, 1)
  await runtime.spawn(parent, { mode: 'continuable', label: 'resident', context: 'fresh', id: 'child-e' }).done
  await damaged('child-f', parent.id, { version: 2, mode: 'continuable', provider: 'scripted' }, 1)
  // Grandchildren under the finished one-shot: the walk reaches them though child-a itself is not listed.
  const scanner = sessions.restore(await persistence.load('child-a' as never))
  await runtime.spawn(scanner, { mode: 'continuable', label: 'deep', context: 'fresh', id: 'grandchild-a' }).done
  await damaged('grandchild-b', scanner.id, { version: 2, mode: 'one-shot', provider: 5 }, 2)
  await sessions.dispose(scanner.id)
  // child-e is loaded into this process between turns: resident, not running.
  sessions.restore(await persistence.load('child-e' as never))
}

describe('list_agents (the default, harness format)', () => {
  it('lists continuable children as `<id> [<status>] — <label>`: running, idle (loaded between turns), ready (storage only); diagnostics of any mode', async () => {
    const { c, runtime, tool, parent } = await host()
    expect(await tool.execute({}, { agent: parent })).toEqual({ text: '(no subagents)', entries: [] })
    await family(c, runtime, parent)
    const result = await tool.execute({}, { agent: parent })
    expect(result.text).toBe(
      [
        'child-b [ready] — reviewer',
        'child-c [running] — watcher',
        'child-d [diagnostic: corrupt]',
        'child-e [idle] — resident',
        'child-f [diagnostic: corrupt]',
      ].join('\n'),
    )
    expect(result.entries).toEqual([
      { kind: 'child', id: 'child-b', label: 'reviewer', status: 'ready' },
      { kind: 'child', id: 'child-c', label: 'watcher', status: 'running' },
      { kind: 'diagnostic', id: 'child-d', reason: 'corrupt' },
      { kind: 'child', id: 'child-e', label: 'resident', status: 'idle' },
      { kind: 'diagnostic', id: 'child-f', reason: 'corrupt' },
    ])
    // The explicit scope answers the same.
    expect(await tool.execute({ scope: 'children' }, { agent: parent })).toEqual(result)
  })

  it('walks descendants depth-first with ` parent=<id> depth=<n>`, through one-shot children it does not list', async () => {
    const { c, runtime, tool, parent } = await host()
    await family(c, runtime, parent)
    const result = await tool.execute({ scope: 'descendants' }, { agent: parent })
    expect(result.text).toBe(
      [
        'grandchild-a [ready] parent=child-a depth=2 — deep',
        'grandchild-b [diagnostic: corrupt] parent=child-a depth=2',
        'child-b [ready] parent=parent depth=1 — reviewer',
        'child-c [running] parent=parent depth=1 — watcher',
        'child-d [diagnostic: corrupt] parent=parent depth=1',
        'child-e [idle] parent=parent depth=1 — resident',
        'child-f [diagnostic: corrupt] parent=parent depth=1',
      ].join('\n'),
    )
    expect(result.entries[0]).toEqual({ kind: 'child', id: 'grandchild-a', label: 'deep', status: 'ready', parent: 'child-a', depth: 2 })
    expect(result.entries[1]).toEqual({ kind: 'diagnostic', id: 'grandchild-b', reason: 'corrupt', parent: 'child-a', depth: 2 })
  })

  it('is the list_agents of both dialects unless the table is asked for', async () => {
    const { c, runtime, parent } = await host()
    await family(c, runtime, parent)
    for (const dialect of ['dsh', 'harness'] as const) {
      const [listAgents] = subagentControlTools(runtime, { dialect, filter: ['list_agents'] })
      expect(listAgents!.description).toBe(listAgentsDescription)
      expect(((await listAgents!.execute({}, { agent: parent })) as { text: string }).text.split('\n')[0]).toBe(
        'child-b [ready] — reviewer',
      )
    }
    const [table] = subagentControlTools(runtime, { dialect: 'harness', filter: ['list_agents'], listAgentsFormat: 'table' })
    expect(((await table!.execute({}, { agent: parent })) as { text: string }).text.split('\n')[0]).toBe(
      'child-a  ready  one-shot  "scan the repo"  +subagents',
    )
  })

  it('rejects bad input and a bad format with typed errors', async () => {
    const { runtime, tool, parent } = await host()
    const error = await tool.execute({ scope: 'all' }, { agent: parent }).catch((e: unknown) => e)
    expect(isDshError(error, 'TOOL_SUBAGENT_CONTROL_INVALID_INPUT')).toBe(true)
    expect((error as Error).message).toBe(
      'list_agents input is invalid (scope: Invalid option: expected one of "children"|"descendants"). Expected {} or { "scope": "children" | "descendants" }.',
    )
    expect(() => createListAgentsTool(runtime, { format: 'tree' as never })).toThrow(
      expect.objectContaining({ code: 'TOOL_SUBAGENT_CONTROL_INVALID_OPTIONS' }),
    )
  })
})

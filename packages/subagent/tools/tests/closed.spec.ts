import type { Context } from '@dsh/context'
import { createScriptedDriver, subagentsPlugin } from '@dsh/subagent'
import { afterEach, describe, expect, it } from 'vitest'
import {
  createListAgentsTool,
  listAgentsDescription,
  listAgentsTableDescription,
  renderListAgents,
  subagentControlTools,
  toListAgentsRow,
} from '../src/index.js'
import { storeContext } from './support.js'

let ctx: Context | undefined
afterEach(async () => {
  await ctx?.dispose()
  ctx = undefined
})

/** A parent with a continuable child `a` that answered once and went cold, and a second one, `b`, that did the same. */
async function family() {
  ctx = await storeContext()
  await ctx.activate(subagentsPlugin({ driver: createScriptedDriver(() => [{ kind: 'message', text: 'kid reply' }]) }))
  const runtime = ctx.require('subagents')
  const parent = ctx.require('sessions').create({ id: 'parent' })
  await runtime.spawn(parent, { mode: 'continuable', label: 'a', context: 'fresh', prompt: 'go', id: 'child-a' }).done
  await runtime.spawn(parent, { mode: 'continuable', label: 'b', context: 'fresh', prompt: 'go', id: 'child-b' }).done
  const tool = (name: 'wait_agents' | 'close_agent' | 'send_message') => subagentControlTools(runtime, { filter: [name] })[0]!
  return { runtime, parent, tool }
}

describe('a closed subagent, as the control tools show it', () => {
  it('wait_agents reports closed once close_agent has closed a child that was waited for before', async () => {
    const { parent, tool } = await family()
    const wait = tool('wait_agents')
    expect((await wait.execute({ ids: ['child-a'] }, { agent: parent })).text).toBe('child-a  completed\n  kid reply')
    expect((await tool('close_agent').execute({ id: 'child-a' }, { agent: parent })).text).toBe('child-a is closed.')
    expect(await wait.execute({ ids: ['child-a', 'child-b'] }, { agent: parent })).toMatchObject({
      text: 'child-a  closed\nchild-b  completed\n  kid reply',
      agents: [{ id: 'child-a', state: 'closed' }, { state: 'settled' }],
    })
  })

  it('list_agents shows it closed in both renderings, not as one a send_message would start', async () => {
    const { runtime, parent, tool } = await family()
    await tool('close_agent').execute({ id: 'child-a' }, { agent: parent })
    const harness = await createListAgentsTool(runtime).execute({}, { agent: parent })
    expect(harness.text).toBe('child-a [closed] — a\nchild-b [ready] — b')
    expect(harness.entries[0]).toEqual({ kind: 'child', id: 'child-a', label: 'a', status: 'closed' })
    const table = await createListAgentsTool(runtime, { format: 'table' }).execute({}, { agent: parent })
    expect(table.text).toBe('child-a  closed  continuable  "a"\nchild-b  idle  continuable  "b"')
    expect(table.rows[0]).toMatchObject({ kind: 'child', id: 'child-a', status: 'closed' })
    // What `dsh agents` renders from the same entries (with usage).
    const entries = await runtime.explainChildren(parent.id)
    expect(renderListAgents(entries.map((entry) => toListAgentsRow(entry, 0, true))).split('\n')[0]).toMatch(
      /^child-a {2}closed {2}continuable/,
    )
    // And it is what it says: a message is refused.
    const refused = await tool('send_message')
      .execute({ id: 'child-a', message: 'more' }, { agent: parent })
      .then(
        () => undefined,
        (e: unknown) => e as { code?: string },
      )
    expect(refused?.code).toBe('SUBAGENT_CLOSED')
  })

  it('describes the closed status in both renderings', () => {
    expect(listAgentsDescription).toContain("'closed' (closed with close_agent: finished for good, it takes no further message)")
    expect(listAgentsTableDescription).toContain("'closed' (a continuable agent closed with close_agent: it takes no further message)")
  })

  it('an entry without the closed mark (built elsewhere, or unknown) keeps the status it had', () => {
    const row = { kind: 'child', id: 'c', activity: 'inactive', hasChildren: false, mode: 'continuable', label: 'x' } as const
    const entry = { row, rung: 3, parentId: 'p', depth: 1, tokens: null, durationMs: null, startedAt: null, endedAt: null } as never
    expect(toListAgentsRow(entry)).toMatchObject({ status: 'idle' })
    expect(toListAgentsRow({ ...(entry as object), closed: null } as never)).toMatchObject({ status: 'idle' })
  })
})

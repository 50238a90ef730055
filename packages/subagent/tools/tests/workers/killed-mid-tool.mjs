// A real agent process over a JSONL root: a top-level parent starts a
// continuable child that holds its turn, then calls wait_agents on it. Once
// that tool call is durable (flushed) it prints `in-tool <parent> <child>` and
// waits to be killed with SIGKILL.
// argv: root
import { Context } from '@dsh/context'
import { sessionStorePlugin } from '@dsh/session'
import { sessionPersistencePlugin } from '@dsh/session-persistence'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { sessionProjectionsPlugin } from '@dsh/session-projection'
import { createSessionQuery } from '@dsh/session-query'
import { createScriptedDriver, subagentsPlugin } from '@dsh/subagent'
import { subagentControlTools } from '@dsh/tool-subagent-control'

const [root] = process.argv.slice(2)
const ctx = new Context()
await ctx.activate(sessionStorePlugin())
await ctx.activate(sessionProjectionsPlugin())
await ctx.activate(sessionPersistencePlugin(createJsonlPersistence({ root }), { writeBehindMs: 0 }))
ctx.provide('sessionQuery', createSessionQuery({ sessions: ctx.require('sessions'), persistence: ctx.require('sessionPersistence') }))
const sessions = ctx.require('sessions')

/** The control tools, with wait_agents announcing (after a flush) that the call is in flight. */
function tools(_agent, runtime) {
  return subagentControlTools(runtime).map((tool) =>
    tool.name !== 'wait_agents'
      ? tool
      : {
          ...tool,
          async execute(input, context) {
            const [child] = input.ids
            await sessions.flush(context.agent)
            await sessions.flush(child)
            process.stdout.write(`in-tool ${context.agent.id} ${child}\n`)
            return tool.execute(input, context)
          },
        },
  )
}

const never = new Promise(() => {})
const driver = createScriptedDriver((run) => {
  if (run.identity !== undefined)
    return [
      { kind: 'chunk', text: 'working' },
      { kind: 'until', promise: never },
    ]
  return [
    { kind: 'call', name: 'subagent', arguments: { prompt: 'migrate the schema', label: 'migrator', mode: 'continuable' } },
    { kind: 'call', name: 'wait_agents', arguments: (previous) => ({ ids: [previous[0].content.id], timeout_seconds: 600 }) },
    { kind: 'message', text: 'never reached' },
  ]
})
await ctx.activate(subagentsPlugin({ driver, tools }))
const parent = sessions.create({ id: 'killed-parent' })
ctx.require('subagents').drive(parent, { prompt: 'delegate the migration' })
await never

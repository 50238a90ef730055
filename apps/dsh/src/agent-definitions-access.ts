import { resolve } from 'node:path'
import { type AgentDefinitions, agentDefinitions } from '@dsh/agent-definitions'
import { DEFAULT_ROOT, type ParsedCommand } from './command.js'

/**
 * The agent definitions a command reads: `<root>/.dsh/agents/`, where root
 * is the session root (`--root`, default `./.dsh`), and
 * `<project>/.dsh/agents/`, where project is `--project DIR` (default: the
 * current directory). A project definition overrides the root's of the same
 * name. Only commands that declare a `project` option take `--project`.
 */
export function commandAgentDefinitions(command: ParsedCommand, cwd: string = process.cwd()): AgentDefinitions {
  return agentDefinitions({ root: resolve(cwd, command.root ?? DEFAULT_ROOT), project: resolve(cwd, command.string('project') ?? '.') })
}

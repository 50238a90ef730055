import { isAbsolute, join, resolve } from 'node:path'
import { throwIfAborted } from '@dsh/context'
import { AgentDefinitionError } from './errors.js'
import { definitionFileNames, readDefinitionFile } from './files.js'
import { parseAgentDefinition } from './parse.js'
import { AGENT_NAME_PATTERN, type AgentDefinition, type AgentDefinitionScope } from './schema.js'

/** One directory definitions are read from. */
export interface AgentDirectory {
  readonly scope: AgentDefinitionScope
  readonly dir: string
}

export interface AgentDefinitionsOptions {
  /** The root directory: definitions in `<root>/.dsh/agents/`. Absolute. */
  readonly root?: string
  /** The project directory: definitions in `<project>/.dsh/agents/`, overriding the root's by name. Absolute. */
  readonly project?: string
}

/** A definition as listed: what it sets, without its instructions, and the root file it overrides, if any. */
export type ListedAgentDefinition = Omit<AgentDefinition, 'instructions'> & {
  /** The root's file of the same name, which this project definition overrides. */
  readonly overrides?: string
}

/**
 * The agent definitions of a root and a project. Reads happen on each call
 * (a definition edited on disk applies to the next spawn); nothing is cached.
 */
export interface AgentDefinitions {
  /** Where definitions are read from, in precedence order: the root's first, the project's last (it wins). */
  readonly directories: readonly AgentDirectory[]
  /**
   * The definition named `name`: the project's file `<name>.md` if there is
   * one, else the root's. Only that file is read, and it is validated whole
   * before this resolves.
   */
  get(name: string, signal?: AbortSignal): Promise<AgentDefinition>
  /** Several definitions, every one read and validated before this resolves (the first problem rejects it). */
  getAll(names: readonly string[], signal?: AbortSignal): Promise<AgentDefinition[]>
  /**
   * Every definition, one per name (the project's wins), sorted by name.
   * Every file in both directories is read and validated, overridden ones
   * too; any invalid file rejects the listing with that file's error (the
   * first by directory, then file name), and `details.problems` lists every
   * invalid file.
   */
  list(signal?: AbortSignal): Promise<ListedAgentDefinition[]>
}

/** The directories of a root and a project, in precedence order (the same directory given twice counts once, as the project's). */
export function agentDirectories(options: AgentDefinitionsOptions): AgentDirectory[] {
  const directories: AgentDirectory[] = []
  for (const scope of ['root', 'project'] as const) {
    const base = options[scope]
    if (base === undefined) continue
    if (typeof base !== 'string' || base.length === 0 || !isAbsolute(base)) {
      throw new AgentDefinitionError(
        'AGENT_DEFINITION_OPTIONS_INVALID',
        `The ${scope} directory of the agent definitions must be an absolute path, got ${JSON.stringify(base)}.`,
      )
    }
    const dir = join(resolve(base), '.dsh', 'agents')
    const same = directories.findIndex((entry) => entry.dir === dir)
    if (same >= 0) directories.splice(same, 1)
    directories.push({ scope, dir })
  }
  return directories
}

/** Refuses a name that cannot be a definition's before anything is read. */
export function checkAgentName(name: unknown): string {
  if (typeof name !== 'string' || !AGENT_NAME_PATTERN.test(name)) {
    throw new AgentDefinitionError(
      'AGENT_NAME_INVALID',
      `${JSON.stringify(name)} is not an agent name: a name is 1 to 64 lower-case letters, digits, '-' or '_', starting with a letter or digit.`,
      { details: { name: typeof name === 'string' ? name : String(name) } },
    )
  }
  return name
}

/** The definitions of `options.root` and `options.project` (see {@link AgentDefinitions}). */
export function agentDefinitions(options: AgentDefinitionsOptions): AgentDefinitions {
  const directories = Object.freeze(agentDirectories(options))
  const byPrecedence = [...directories].reverse()

  async function get(name: string, signal?: AbortSignal): Promise<AgentDefinition> {
    checkAgentName(name)
    for (const { scope, dir } of byPrecedence) {
      throwIfAborted(signal)
      const text = await readDefinitionFile(dir, `${name}.md`)
      throwIfAborted(signal)
      if (text !== undefined) return parseAgentDefinition(text, { file: join(dir, `${name}.md`), scope, expectedName: name })
    }
    const where = directories.length === 0 ? 'no agent directories are configured' : `looked in ${directories.map((d) => d.dir).join(', ')}`
    throw new AgentDefinitionError('AGENT_NOT_FOUND', `There is no agent definition named '${name}' (${where}).`, {
      details: { name, directories: directories.map((d) => d.dir) },
    })
  }

  return Object.freeze({
    directories,
    get,
    async getAll(names: readonly string[], signal?: AbortSignal): Promise<AgentDefinition[]> {
      for (const name of names) checkAgentName(name)
      const found: AgentDefinition[] = []
      for (const name of names) found.push(await get(name, signal))
      return found
    },
    async list(signal?: AbortSignal): Promise<ListedAgentDefinition[]> {
      const byName = new Map<string, ListedAgentDefinition>()
      const problems: AgentDefinitionError[] = []
      for (const { scope, dir } of directories) {
        throwIfAborted(signal)
        for (const fileName of await definitionFileNames(dir)) {
          throwIfAborted(signal)
          const file = join(dir, fileName)
          try {
            const text = await readDefinitionFile(dir, fileName)
            if (text === undefined) continue
            const definition = parseAgentDefinition(text, { file, scope, expectedName: fileName.slice(0, -'.md'.length) })
            const shadowed = byName.get(definition.name)
            byName.set(definition.name, listed(definition, shadowed?.file))
          } catch (error) {
            if (!(error instanceof AgentDefinitionError)) throw error
            problems.push(error)
          }
        }
      }
      throwIfAborted(signal)
      const [first] = problems
      if (first !== undefined) {
        const more = problems.length > 1 ? ` (and ${problems.length - 1} more invalid definition file(s))` : ''
        throw new AgentDefinitionError(first.code, `${first.message}${more}`, {
          cause: first,
          details: { ...first.details, problems: problems.map((problem) => ({ code: problem.code, message: problem.message })) },
        })
      }
      return [...byName.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    },
  })
}

function listed(definition: AgentDefinition, overrides: string | undefined): ListedAgentDefinition {
  const { instructions: _instructions, ...rest } = definition
  return Object.freeze({ ...rest, ...(overrides === undefined ? {} : { overrides }) })
}

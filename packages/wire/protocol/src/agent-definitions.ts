import { z } from 'zod'

/** Where a definition was found: the root's directory or the project's (which wins a name both have). */
export const agentDefinitionScope = z.enum(['root', 'project'])

/** One directory definitions are read from, in precedence order. */
export const agentDirectory = z.object({ scope: agentDefinitionScope, dir: z.string() })

/** A definition's limits on what a child started from it may spend; a budget left out is not limited. */
export const agentBudgets = z.object({
  maxTokens: z.number().int().positive().optional(),
  maxCostUsd: z.number().positive().optional(),
  maxWallMs: z.number().int().positive().optional(),
  maxTurns: z.number().int().positive().optional(),
})

/** One definition as listed: everything but its instructions, with the file it came from and the root file it overrides. */
export const agentDefinitionEntry = z.object({
  name: z.string(),
  description: z.string(),
  provider: z.string().optional(),
  model: z.string().optional(),
  /** The tools a child may call; absent: the runtime's tools, unrestricted. */
  tools: z.array(z.string()).optional(),
  budgets: agentBudgets.optional(),
  file: z.string(),
  scope: agentDefinitionScope,
  overrides: z.string().optional(),
})

/** `dsh agents --definitions --json`: the directories read and one definition per name, sorted by name. */
export const agentDefinitionList = z.object({ directories: z.array(agentDirectory), definitions: z.array(agentDefinitionEntry) })

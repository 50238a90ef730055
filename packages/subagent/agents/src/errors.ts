import { DshError } from '@dsh/context'

export type AgentDefinitionErrorCode =
  /**
   * A definition file is not a valid definition: no `---` frontmatter fences,
   * YAML that does not parse, a key the schema does not know, a value of the
   * wrong type, a name that does not match the file name, or a file over the
   * size limit. The message and `details` name the file and the line.
   */
  | 'AGENT_DEFINITION_INVALID'
  /**
   * A valid definition asks for what the program starting it cannot give: a
   * provider other than the one its driver speaks, or a tool name the
   * children it starts are not offered. Nothing was started; `details` names
   * the agent, its file and what it asked for.
   */
  | 'AGENT_DEFINITION_UNSUPPORTED'
  /** No definition file of that name in any configured directory (the message lists where it looked). */
  | 'AGENT_NOT_FOUND'
  /** An agent name that cannot be a definition's (e.g. `../x`, upper case, a slash): nothing was read. */
  | 'AGENT_NAME_INVALID'
  /**
   * A definition file or directory could not be read: a permission error, a
   * directory where a file should be, a symbolic link that resolves outside
   * its directory, or a directory holding more definitions than the limit.
   */
  | 'AGENT_DEFINITION_UNREADABLE'
  /** The program configured the definitions badly: a directory path that is empty or not absolute. */
  | 'AGENT_DEFINITION_OPTIONS_INVALID'

/** The one error class of `@dsh/agent-definitions`. */
export class AgentDefinitionError extends DshError<AgentDefinitionErrorCode> {}

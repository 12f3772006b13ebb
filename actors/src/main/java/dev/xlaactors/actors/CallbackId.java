package dev.xlaactors.actors;

/**
 * What the {@link CallbackDispatcher} assigned to a registered callback.
 *
 * @param id the dispatcher's id: the same function, template and static argument always get the same id
 * @param name the name programs use in {@code backend_config = {callback = "<name>"}}
 */
public record CallbackId(long id, String name) {}

//! ACL, for a server with one user: `default`, allowed every command, key and
//! channel, whose password is `requirepass` (none: `nopass`). Tools that ask
//! about users (ACL WHOAMI, LIST, GETUSER, CAT, DRYRUN) get Redis's answers
//! for that user; ACL SETUSER takes the rules that keep it so (`on`, a
//! password, `nopass`, `resetpass`, the all-permission rules) and refuses the
//! rest, since slotraft has no per-user permissions.

use crate::server::Shared;
use bytes::Bytes;
use keyspace::args::is_keyword;
use keyspace::commands;
use resp::Frame;

const DEFAULT_USER: &str = "default";
const NO_ACL_FILE: &str = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.";

fn bulk(text: impl Into<String>) -> Frame {
    Frame::Bulk(Bytes::from(text.into()))
}

fn lines(text: &[&str]) -> Frame {
    Frame::Array(
        text.iter()
            .map(|line| Frame::Simple(Bytes::copy_from_slice(line.as_bytes())))
            .collect(),
    )
}

fn user_not_found(name: &[u8]) -> Frame {
    Frame::error_owned(format!(
        "ERR User '{}' not found",
        String::from_utf8_lossy(name)
    ))
}

/// The default user's password hashes (SHA-256, hex), as ACL shows them.
fn password_hashes(shared: &Shared) -> Vec<String> {
    shared
        .config()
        .requirepass()
        .map(|password| vec![hex(&sha256(password.as_bytes()))])
        .unwrap_or_default()
}

pub fn execute(shared: &Shared, name: &str, arguments: &[Bytes]) -> Option<Frame> {
    let reply = match name {
        "acl|whoami" => bulk(DEFAULT_USER),
        "acl|users" => Frame::Array(vec![bulk(DEFAULT_USER)]),
        "acl|list" => {
            let password = match password_hashes(shared).first() {
                Some(hash) => format!("#{hash}"),
                None => String::from("nopass"),
            };
            Frame::Array(vec![bulk(format!(
                "user default on {password} ~* &* +@all"
            ))])
        }
        "acl|getuser" => {
            if &arguments[2][..] != DEFAULT_USER.as_bytes() {
                return Some(Frame::Null);
            }
            let hashes = password_hashes(shared);
            let mut flags = vec![bulk("on")];
            if hashes.is_empty() {
                flags.push(bulk("nopass"));
            }
            let field = |name: &'static str, value: Frame| (bulk(name), value);
            Frame::Map(vec![
                field("flags", Frame::Array(flags)),
                field(
                    "passwords",
                    Frame::Array(hashes.into_iter().map(bulk).collect()),
                ),
                field("commands", bulk("+@all")),
                field("keys", bulk("~*")),
                field("channels", bulk("&*")),
                field("selectors", Frame::Array(Vec::new())),
            ])
        }
        "acl|cat" => match arguments.get(2) {
            None => Frame::Array(keyspace::command::ACL_CATEGORIES.iter().map(|name| bulk(*name)).collect()),
            Some(category) => {
                let category = String::from_utf8_lossy(category).to_ascii_lowercase();
                if !keyspace::command::ACL_CATEGORIES.contains(&category.as_str()) {
                    return Some(Frame::error_owned(format!(
                        "ERR Unknown category '{category}'"
                    )));
                }
                let mut names = Vec::new();
                for spec in commands::all_commands() {
                    for command in std::iter::once(spec).chain(spec.subcommands.iter()) {
                        if command.acl_categories().contains(&category.as_str()) {
                            names.push(bulk(command.name));
                        }
                    }
                }
                Frame::Array(names)
            }
        },
        "acl|log" => match &arguments[2..] {
            [] => Frame::Array(Vec::new()),
            [word] if is_keyword(word, "reset") => Frame::OK,
            [word] => match keyspace::args::parse_i64(word) {
                Ok(_) => Frame::Array(Vec::new()),
                Err(error) => error,
            },
            _ => Frame::error(
                "ERR unknown subcommand or wrong number of arguments for 'log'. Try ACL HELP.",
            ),
        },
        "acl|genpass" => {
            let bits = match arguments.get(2) {
                None => 256,
                Some(word) => match keyspace::args::parse_i64(word) {
                    Ok(bits) if (1..=4096).contains(&bits) => bits as usize,
                    _ => {
                        return Some(Frame::error(
                            "ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096",
                        ))
                    }
                },
            };
            let characters = bits.div_ceil(4);
            let mut random = vec![0u8; characters.div_ceil(2)];
            if fill_random(&mut random).is_err() {
                return Some(Frame::error("ERR no random source available"));
            }
            let mut text = hex(&random);
            text.truncate(characters);
            bulk(text)
        }
        "acl|dryrun" => {
            if &arguments[2][..] != DEFAULT_USER.as_bytes() {
                return Some(user_not_found(&arguments[2]));
            }
            let command = &arguments[3..];
            match commands::resolve(command) {
                Ok(_) => Frame::OK,
                Err(_) if commands::lookup(&command[0]).is_none() => {
                    Frame::error_owned(format!(
                        "ERR Command '{}' not found",
                        String::from_utf8_lossy(&command[0])
                    ))
                }
                Err(error) => error,
            }
        }
        "acl|setuser" => setuser(shared, arguments),
        "acl|deluser" => {
            if arguments[2..]
                .iter()
                .any(|name| &name[..] == DEFAULT_USER.as_bytes())
            {
                Frame::error("ERR The 'default' user cannot be removed")
            } else {
                Frame::Integer(0)
            }
        }
        "acl|load" | "acl|save" => Frame::error(NO_ACL_FILE),
        "acl|help" => lines(&[
            "ACL <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "CAT [<category>]",
            "    List all commands that belong to <category>, or all command categories",
            "    when no category is specified.",
            "DELUSER <username> [<username> ...]",
            "    Delete a list of users.",
            "DRYRUN <username> <command> [<arg> ...]",
            "    Returns whether the user can execute the given command without executing the command.",
            "GETUSER <username>",
            "    Get the user's details.",
            "GENPASS [<bits>]",
            "    Generate a secure 256-bit user password. The optional `bits` argument can",
            "    be used to specify a different size.",
            "LIST",
            "    Show users details in config file format.",
            "LOAD",
            "    Reload users from the ACL file.",
            "LOG [<count> | RESET]",
            "    Show the ACL log entries.",
            "SAVE",
            "    Save the current config to the ACL file.",
            "SETUSER <username> <attribute> [<attribute> ...]",
            "    Create or modify a user with the specified attributes.",
            "USERS",
            "    List all the registered usernames.",
            "WHOAMI",
            "    Return the current connection username.",
            "HELP",
            "    Prints this help.",
        ]),
        _ => return None,
    };
    Some(reply)
}

/// ACL SETUSER default with the rules one user with every permission can
/// keep: its password through `requirepass`.
fn setuser(shared: &Shared, arguments: &[Bytes]) -> Frame {
    if &arguments[2][..] != DEFAULT_USER.as_bytes() {
        return Frame::error(
            "ERR slotraft has one user, 'default', with every permission: ACL SETUSER cannot create others",
        );
    }
    let mut password: Option<Option<String>> = None;
    for rule in &arguments[3..] {
        let text = String::from_utf8_lossy(rule).into_owned();
        match text.as_str() {
            "on" | "~*" | "&*" | "+@all" | "allkeys" | "allchannels" | "allcommands"
            | "resetchannels" => {}
            "nopass" | "resetpass" => password = Some(None),
            _ if text.starts_with('>') => password = Some(Some(text[1..].to_string())),
            _ => {
                return Frame::error_owned(format!(
                    "ERR Error in ACL SETUSER modifier '{text}': Syntax error (slotraft keeps one user with every permission; only its password can change)"
                ))
            }
        }
    }
    if let Some(password) = password {
        let value = password.unwrap_or_default();
        let pairs: [(&[u8], &[u8]); 1] = [(b"requirepass", value.as_bytes())];
        let mut config = shared.config_mut();
        if let Err(error) = config.set_many(&pairs) {
            return Frame::error_owned(error);
        }
        crate::resp_client::set_password(config.requirepass());
    }
    Frame::OK
}

fn fill_random(out: &mut [u8]) -> std::io::Result<()> {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")?.read_exact(out)
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(text, "{byte:02x}");
    }
    text
}

/// SHA-256 (FIPS 180-4), for showing password hashes as ACL does.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut state: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut message = data.to_vec();
    message.push(0x80);
    while message.len() % 64 != 56 {
        message.push(0);
    }
    message.extend_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    for block in message.chunks_exact(64) {
        let mut words = [0u32; 64];
        for (index, word) in block.chunks_exact(4).enumerate() {
            words[index] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for index in 16..64 {
            let s0 = words[index - 15].rotate_right(7)
                ^ words[index - 15].rotate_right(18)
                ^ (words[index - 15] >> 3);
            let s1 = words[index - 2].rotate_right(17)
                ^ words[index - 2].rotate_right(19)
                ^ (words[index - 2] >> 10);
            words[index] = words[index - 16]
                .wrapping_add(s0)
                .wrapping_add(words[index - 7])
                .wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut h] = state;
        for index in 0..64 {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let choice = (e & f) ^ (!e & g);
            let temp1 = h
                .wrapping_add(s1)
                .wrapping_add(choice)
                .wrapping_add(K[index])
                .wrapping_add(words[index]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let majority = (a & b) ^ (a & c) ^ (b & c);
            let temp2 = s0.wrapping_add(majority);
            h = g;
            g = f;
            f = e;
            e = d.wrapping_add(temp1);
            d = c;
            c = b;
            b = a;
            a = temp1.wrapping_add(temp2);
        }
        for (slot, value) in state.iter_mut().zip([a, b, c, d, e, f, g, h]) {
            *slot = slot.wrapping_add(value);
        }
    }
    let mut digest = [0u8; 32];
    for (chunk, word) in digest.chunks_exact_mut(4).zip(state) {
        chunk.copy_from_slice(&word.to_be_bytes());
    }
    digest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_matches_published_vectors() {
        assert_eq!(
            hex(&sha256(b"")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            hex(&sha256(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            hex(&sha256(
                b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
            )),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
        // Redis shows this hash for the password "secret".
        assert_eq!(
            hex(&sha256(b"secret")),
            "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b"
        );
    }
}

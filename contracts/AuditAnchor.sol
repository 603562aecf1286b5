// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/// @title AuditAnchor
/// @notice Records checkpoints of a service's audit chain as events, so anyone can list every
/// checkpoint from the chain alone. Anyone may call it: a verifier trusts only the anchors sent
/// by the addresses it knows to be the service's (`by`, indexed), and finds one by its `seq`.
contract AuditAnchor {
    /// @param by the sender of the anchoring transaction
    /// @param seq the audit row the checkpoint ends at
    /// @param head that row's hash (SHA-256 of the row)
    /// @param rowsRoot the Merkle root of the hashes of the rows the checkpoint covers
    event Anchored(address indexed by, uint256 indexed seq, bytes32 head, bytes32 rowsRoot);

    function anchor(uint256 seq, bytes32 head, bytes32 rowsRoot) external {
        emit Anchored(msg.sender, seq, head, rowsRoot);
    }
}
